package providers_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// The README is a front door: the reference lives in docs/, one page per
// subject, and the pages link to each other, to the README and to the
// code. TestDocLinks keeps those links true: every relative link and image
// of the repository's Markdown names a file or folder that exists, and an
// anchor (#…) names a heading of the page it points at, as GitHub spells
// it. Links to other sites are not followed.
var (
	// linkTarget is the target of an inline link or image, ](target) or
	// ](target "title"); refTarget a reference definition's, [name]: target.
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refTarget  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// markdownFiles lists the Markdown of the repository: every *.md but in
// folders that are the build's or the machine's own.
func markdownFiles(fsys fs.FS) ([]string, error) {
	var files []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "var" || d.Name() == "bin" || d.Name() == "node_modules") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}

// outsideFences calls f with each line of a Markdown text outside fenced
// code blocks.
func outsideFences(text string, f func(line string)) {
	fence := ""
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
		default:
			f(line)
		}
	}
}

// prose calls f with each line of a Markdown text outside fenced code
// blocks, its code spans blanked.
func prose(text string, f func(line string)) {
	outsideFences(text, func(line string) { f(codeSpan.ReplaceAllString(line, "``")) })
}

// anchors is the set of anchors a Markdown page has: its headings as
// GitHub makes them (lower case; letters, digits, '-' and '_' kept, spaces
// made '-', everything else dropped; a repeated one numbered -1, -2, …) and
// its HTML anchors.
func anchors(text string) map[string]bool {
	set := map[string]bool{}
	seen := map[string]int{}
	outsideFences(text, func(line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			set[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, m[1])
		if n := seen[slug]; n > 0 {
			set[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			set[slug] = true
		}
		seen[slug]++
	})
	return set
}

// docLinkErrors says which relative links of the Markdown in fsys point
// at nothing.
func docLinkErrors(fsys fs.FS) ([]string, error) {
	files, err := markdownFiles(fsys)
	if err != nil {
		return nil, err
	}
	texts := map[string]string{}
	read := func(p string) (string, error) {
		if s, ok := texts[p]; ok {
			return s, nil
		}
		b, err := fs.ReadFile(fsys, p)
		texts[p] = string(b)
		return string(b), err
	}
	var errs []string
	for _, file := range files {
		text, err := read(file)
		if err != nil {
			return nil, err
		}
		prose(text, func(line string) {
			var targets []string
			for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refTarget.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				p, anchor, _ := strings.Cut(target, "#")
				dest := file
				if p != "" {
					dest = path.Clean(path.Join(path.Dir(file), p))
					if _, err := fs.Stat(fsys, dest); err != nil {
						errs = append(errs, fmt.Sprintf("%s: a link to %s, which does not exist", file, target))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				page, err := read(dest)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s: a link to %s: %v", file, target, err))
					continue
				}
				if !anchors(page)[anchor] {
					errs = append(errs, fmt.Sprintf("%s: a link to %s, but %s has no heading #%s", file, target, dest, anchor))
				}
			}
		})
	}
	sort.Strings(errs)
	return errs, nil
}

// TestDocLinks: every relative link of the repository's Markdown (the
// README, docs/, CONTRIBUTING.md, …) resolves, anchors included.
func TestDocLinks(t *testing.T) {
	root := filepath.Dir(readmePath())
	errs, err := docLinkErrors(os.DirFS(root))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// TestDocLinkErrors: the check finds a missing file, a missing anchor on
// another page and on its own, and reads headings as GitHub does; it
// ignores code, other sites and folders the repository does not keep.
func TestDocLinkErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Title\n\n## The buyer's side\n\n## What start-up refuses, and `what` leaves\n\n## Notes\n\n## Notes\n\n" +
			"[a](docs/a.md#top-part) [b](docs/a.md#nowhere) [c](docs/gone.md) ![d](docs/shot.png)\n" +
			"[e](#the-buyers-side) [f](#what-start-up-refuses-and-what-leaves) [g](#notes-1) [h](#notes-2)\n" +
			"[i](https://example.com/x.md#y) `[j](gone.md)` [k](docs/) [l](docs/a.md \"title\")\n\n" +
			"```md\n[m](gone.md)\n## Not a heading\n```\n\n[ref]: docs/missing.md\n"),
		},
		"docs/a.md":        {Data: []byte("# Top part\n\n[back](../README.md#not-a-heading) [up](../README.md#title)\n")},
		"docs/shot.png":    {Data: []byte("png")},
		"var/scratch.md":   {Data: []byte("[x](nowhere.md)\n")},
		".github/notes.md": {Data: []byte("[x](nowhere.md)\n")},
	}
	errs, err := docLinkErrors(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md: a link to #notes-2, but README.md has no heading #notes-2",
		"README.md: a link to docs/a.md#nowhere, but docs/a.md has no heading #nowhere",
		"README.md: a link to docs/gone.md, which does not exist",
		"README.md: a link to docs/missing.md, which does not exist",
		"docs/a.md: a link to ../README.md#not-a-heading, but README.md has no heading #not-a-heading",
	}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
