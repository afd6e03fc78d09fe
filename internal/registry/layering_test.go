package registry_test

import (
	"errors"
	"go/build"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/paywebhooks/receiver/"

// imports are the packages of the module that the package in dir (a path
// from the module's root) imports, its tests left out; ok is false when dir
// holds no package.
func imports(t *testing.T, root, dir string) (out []string, ok bool) {
	t.Helper()
	p, err := build.ImportDir(filepath.Join(root, dir), 0)
	var none *build.NoGoError
	if errors.As(err, &none) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	for _, imp := range p.Imports {
		if rest, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, rest)
		}
	}
	return out, true
}

// TestLayering holds the arrows the registry and the configuration keep
// (CONTRIBUTING.md): the registry's list imports the provider folders and
// the frameworks' small types, nothing of the wiring; the configuration is
// a leaf; operators read through owners (internal/ops imports no domain
// package, the console none of their packages); and the list is handed
// down from cmd/ and tests, never imported from below: no package of
// internal/ imports it.
func TestLayering(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")

	frameworks := []string{"internal/registry", "internal/webhooks", "internal/reconcile", "internal/endpoints"}
	list, _ := imports(t, root, "internal/providers")
	for _, imp := range list {
		if !slices.Contains(frameworks, imp) && !strings.HasPrefix(imp, "internal/providers/") {
			t.Errorf("internal/providers imports %s: the registry is a plain list of the provider folders (and %s)",
				imp, strings.Join(frameworks, ", "))
		}
	}

	config, _ := imports(t, root, "internal/config")
	for _, imp := range config {
		if imp != "internal/webhooks" && imp != "internal/db" {
			t.Errorf("internal/config imports %s: it reads plain values; a value its owner parses is read by internal/wiring", imp)
		}
	}

	shape, _ := imports(t, root, "internal/registry")
	for _, imp := range shape {
		if strings.HasPrefix(imp, "internal/providers") || imp == "internal/server" || imp == "internal/wiring" || imp == "internal/config" {
			t.Errorf("internal/registry imports %s: the shape of a line sits below the list and the wiring", imp)
		}
	}

	// Operators read through owners (internal/ops): the operator package
	// names no business table and imports no domain package; the console
	// reads through it.
	operators, _ := imports(t, root, "internal/ops")
	for _, imp := range operators {
		if imp != "internal/webhooks" {
			t.Errorf("internal/ops imports %s: operators read through the owners the wiring hands down (ops.Owner, "+
				"ops.AlertLog), and it imports internal/webhooks alone", imp)
		}
	}
	console, _ := imports(t, root, "internal/console")
	for _, imp := range console {
		if slices.Contains([]string{"internal/alerts", "internal/orders", "internal/subscriptions", "internal/disputes",
			"internal/customers"}, imp) || strings.HasPrefix(imp, "internal/providers") {
			t.Errorf("internal/console imports %s: it reads through internal/ops and the owners it is given", imp)
		}
	}

	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		dir, _ := filepath.Rel(root, path)
		dir = filepath.ToSlash(dir)
		imps, ok := imports(t, root, dir)
		if ok && slices.Contains(imps, "internal/providers") {
			t.Errorf("%s imports internal/providers: the registry's list is handed down from cmd/ (or a test), "+
				"never imported from below", dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
