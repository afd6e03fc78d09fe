package mail

import (
	"embed"
	"fmt"
	htmltemplate "html/template"
	"io/fs"
	"math"
	"path"
	"reflect"
	"strconv"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
)

// The templates: for every name, templates/<name>.txt.tmpl (text/template,
// which also defines the "subject" block) and templates/<name>.html.tmpl
// (html/template).
//
//go:embed templates/*.tmpl
var templateFS embed.FS

type mailTemplate struct {
	text *texttemplate.Template
	html *htmltemplate.Template
	keys []string // top-level fields the templates refer to
}

var templates = mustLoadTemplates()

// funcs are the functions available to every template.
var funcs = map[string]any{"money": money}

func mustLoadTemplates() map[string]*mailTemplate {
	files, err := fs.Glob(templateFS, "templates/*.txt.tmpl")
	if err != nil {
		panic(err)
	}
	out := make(map[string]*mailTemplate, len(files))
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".txt.tmpl")
		htmlFile := "templates/" + name + ".html.tmpl"
		t := &mailTemplate{
			text: texttemplate.Must(texttemplate.New(path.Base(f)).
				Funcs(funcs).Option("missingkey=zero").ParseFS(templateFS, f)),
			html: htmltemplate.Must(htmltemplate.New(path.Base(htmlFile)).
				Funcs(funcs).Option("missingkey=zero").ParseFS(templateFS, htmlFile)),
		}
		if t.text.Lookup("subject") == nil {
			panic("mail: template " + f + " has no \"subject\" block")
		}
		keys := map[string]bool{}
		for _, tt := range t.text.Templates() {
			fieldNames(tt.Root, keys)
		}
		for _, ht := range t.html.Templates() {
			fieldNames(ht.Tree.Root, keys)
		}
		for k := range keys {
			t.keys = append(t.keys, k)
		}
		out[name] = t
	}
	return out
}

// Render renders the named template (e.g. "order_confirmation") with data and
// returns the subject (whitespace collapsed to single spaces), the plain-text
// body and the HTML body. Keys the templates use but data lacks (or holds as
// nil) render as empty. An unknown name is an error.
func Render(name string, data map[string]any) (subject, text, html string, err error) {
	t, ok := templates[name]
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
