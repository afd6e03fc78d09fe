package mail

import (
	"embed"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
)

// The built-in templates: for every name, templates/<name>.txt.tmpl
// (text/template, which also defines the "subject" block) and
// templates/<name>.html.tmpl (html/template).
//
//go:embed templates/*.tmpl
var templateFS embed.FS

// Templates is a set of email templates by name, each a plain-text part
// with its subject and an HTML part. A nil *Templates is the built-in set.
type Templates struct {
	byName   map[string]*mailTemplate
	replaced []string // the files of MAIL_TEMPLATES_DIR in force, sorted
}

type mailTemplate struct {
	text *texttemplate.Template
	html *htmltemplate.Template
	keys []string // top-level fields the templates refer to
}

var builtin = mustLoadBuiltin()

// funcs are the functions available to every template.
var funcs = map[string]any{"money": money}

func mustLoadBuiltin() *Templates {
	files, err := fs.Glob(templateFS, "templates/*.txt.tmpl")
	if err != nil {
		panic(err)
	}
	ts := &Templates{byName: make(map[string]*mailTemplate, len(files))}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), textSuffix)
		text, err := parseText(name+textSuffix, mustRead(f))
		if err != nil {
			panic("mail: built-in " + err.Error())
		}
		html, err := parseHTML(name+htmlSuffix, mustRead("templates/"+name+htmlSuffix))
		if err != nil {
			panic("mail: built-in " + err.Error())
		}
		ts.byName[name] = newTemplate(text, html)
	}
	return ts
}

func mustRead(name string) []byte {
	b, err := templateFS.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

// The suffixes of a template's two files.
const (
	textSuffix = ".txt.tmpl"
	htmlSuffix = ".html.tmpl"
)

func parseText(file string, src []byte) (*texttemplate.Template, error) {
	t, err := texttemplate.New(file).Funcs(funcs).Option("missingkey=zero").Parse(string(src))
	if err != nil {
		return nil, err
	}
	if t.Lookup("subject") == nil {
		return nil, fmt.Errorf("template %s has no \"subject\" block ({{define \"subject\"}}…{{end}})", file)
	}
	return t, nil
}

func parseHTML(file string, src []byte) (*htmltemplate.Template, error) {
	return htmltemplate.New(file).Funcs(funcs).Option("missingkey=zero").Parse(string(src))
}

func newTemplate(text *texttemplate.Template, html *htmltemplate.Template) *mailTemplate {
	t := &mailTemplate{text: text, html: html}
	keys := map[string]bool{}
	for _, tt := range text.Templates() {
		fieldNames(tt.Root, keys)
	}
	for _, ht := range html.Templates() {
		fieldNames(ht.Tree.Root, keys)
	}
	for k := range keys {
		t.keys = append(t.keys, k)
	}
	sort.Strings(t.keys)
	return t
}

// Builtin returns the built-in templates.
func Builtin() *Templates { return builtin }

// LoadTemplates returns the built-in templates with the files of dir
// (MAIL_TEMPLATES_DIR) in their place: <name>.txt.tmpl replaces the
// plain-text part and subject of the built-in template <name> (it must
// define "subject"), <name>.html.tmpl its HTML part; either may come
// without the other. Files that do not end in .tmpl, and directories, are
// ignored. A .tmpl file named after no built-in template, one that does not
// parse, and one that fails to render with empty data are errors naming
// the file, all reported at once.
func LoadTemplates(dir string) (*Templates, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ts := &Templates{byName: maps.Clone(builtin.byName)}
	var errs []error
	for _, e := range entries {
		file := e.Name()
		if e.IsDir() || !strings.HasSuffix(file, ".tmpl") {
			continue
		}
		full := filepath.Join(dir, file)
		name, isText := strings.CutSuffix(file, textSuffix)
		if !isText {
			name = strings.TrimSuffix(file, htmlSuffix)
		}
		old, ok := ts.byName[name]
		if !ok || (!isText && !strings.HasSuffix(file, htmlSuffix)) {
			errs = append(errs, fmt.Errorf("%s: not the name of a built-in template (<name>%s or <name>%s, <name> one of %s)",
				full, textSuffix, htmlSuffix, strings.Join(builtin.Names(), ", ")))
			continue
		}
		src, err := os.ReadFile(full)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if isText {
			text, err := parseText(file, src)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", full, err))
				continue
			}
			ts.byName[name] = newTemplate(text, old.html)
		} else {
			html, err := parseHTML(file, src)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", full, err))
				continue
			}
			ts.byName[name] = newTemplate(old.text, html)
		}
		ts.replaced = append(ts.replaced, file)
		if _, _, _, err := ts.Render(name, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", full, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Strings(ts.replaced)
	return ts, nil
}

// Names returns the names of the templates, sorted.
func (ts *Templates) Names() []string {
	if ts == nil {
		ts = builtin
	}
	return slices.Sorted(maps.Keys(ts.byName))
}

// Fields returns the top-level fields (.Name) the named template refers
// to, sorted, or nil for an unknown name.
func (ts *Templates) Fields(name string) []string {
	if ts == nil {
		ts = builtin
	}
	if t, ok := ts.byName[name]; ok {
		return slices.Clone(t.keys)
	}
	return nil
}

// Replaced returns the files of MAIL_TEMPLATES_DIR that replace built-in
// templates, sorted; none for the built-in set.
func (ts *Templates) Replaced() []string {
	if ts == nil {
		return nil
	}
	return slices.Clone(ts.replaced)
}

// Render renders the named built-in template (see Templates.Render).
func Render(name string, data map[string]any) (subject, text, html string, err error) {
	return builtin.Render(name, data)
}

// Render renders the named template (e.g. "order_confirmation") with data and
// returns the subject (whitespace collapsed to single spaces), the plain-text
// body and the HTML body. Keys the templates use but data lacks (or holds as
// nil) render as empty. An unknown name is an error.
func (ts *Templates) Render(name string, data map[string]any) (subject, text, html string, err error) {
	if ts == nil {
		ts = builtin
	}
	t, ok := ts.byName[name]
	if !ok {
		return "", "", "", fmt.Errorf("mail: unknown template %q", name)
	}
	// missingkey=zero renders a missing key of a map[string]any as
	// "<no value>" (the zero interface), so fill the gaps with "".
	d := make(map[string]any, len(data)+len(t.keys))
	for k, v := range data {
		d[k] = v
	}
	for _, k := range t.keys {
		if d[k] == nil {
			d[k] = ""
		}
	}

	var b strings.Builder
	if err := t.text.ExecuteTemplate(&b, "subject", d); err != nil {
		return "", "", "", fmt.Errorf("mail: render %s subject: %w", name, err)
	}
	subject = strings.Join(strings.Fields(b.String()), " ")
	b.Reset()
	if err := t.text.Execute(&b, d); err != nil {
		return "", "", "", fmt.Errorf("mail: render %s text: %w", name, err)
	}
	text = strings.TrimSpace(b.String()) + "\n"
	b.Reset()
	if err := t.html.Execute(&b, d); err != nil {
		return "", "", "", fmt.Errorf("mail: render %s html: %w", name, err)
	}
	return subject, text, b.String(), nil
}

// fieldNames adds to keys the first identifier of every field (.Foo.Bar →
// "Foo") used in the tree under n. Fields inside range/with blocks are
// relative to another dot; collecting them too is harmless.
func fieldNames(n parse.Node, keys map[string]bool) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				fieldNames(c, keys)
			}
		}
	case *parse.ActionNode:
		fieldNames(n.Pipe, keys)
	case *parse.IfNode:
		fieldNames(&n.BranchNode, keys)
	case *parse.RangeNode:
		fieldNames(&n.BranchNode, keys)
	case *parse.WithNode:
		fieldNames(&n.BranchNode, keys)
	case *parse.BranchNode:
		fieldNames(n.Pipe, keys)
		fieldNames(n.List, keys)
		fieldNames(n.ElseList, keys)
	case *parse.TemplateNode:
		fieldNames(n.Pipe, keys)
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				for _, a := range c.Args {
					fieldNames(a, keys)
				}
			}
		}
	case *parse.ChainNode:
		fieldNames(n.Node, keys)
	case *parse.FieldNode:
		keys[n.Ident[0]] = true
	}
}

// zeroDecimal lists the currencies whose amounts are not in hundredths
// (Stripe's zero-decimal currencies).
var zeroDecimal = map[string]bool{
	"BIF": true, "CLP": true, "DJF": true, "GNF": true, "JPY": true,
	"KMF": true, "KRW": true, "MGA": true, "PYG": true, "RWF": true,
	"UGX": true, "VND": true, "VUV": true, "XAF": true, "XOF": true,
	"XPF": true,
}

// money formats an amount in the currency's minor unit, such as 3000 and
// "usd", as "30.00 USD". amount may be any integer or float (JSON numbers
// decode as float64) or a numeric string; anything else, including a missing
// value, formats as "".
func money(amount, currency any) string {
	minor, ok := toInt64(amount)
	if !ok {
		return ""
	}
	cur := ""
	if c, ok := currency.(string); ok {
		cur = strings.ToUpper(strings.TrimSpace(c))
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	s := sign + strconv.FormatInt(minor, 10)
	if !zeroDecimal[cur] {
		s = fmt.Sprintf("%s%d.%02d", sign, minor/100, minor%100)
	}
	if cur != "" {
		s += " " + cur
	}
	return s
}

func toInt64(v any) (int64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return int64(math.Round(rv.Float())), true
	case reflect.String: // also json.Number
		n, err := strconv.ParseInt(strings.TrimSpace(rv.String()), 10, 64)
		return n, err == nil
	}
	return 0, false
}
