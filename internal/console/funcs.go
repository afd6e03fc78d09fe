package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"
)

// funcs are the templates' helpers. None returns template.HTML: whatever
// they give is escaped like any other value.
var funcs = template.FuncMap{
	"ago":      ago,
	"dur":      dur,
	"ts":       ts,
	"tsp":      tsp,
	"money":    money,
	"pathq":    url.PathEscape,
	"query":    url.QueryEscape,
	"upper":    strings.ToUpper,
	"add":      func(a, b int) int { return a + b },
	"f1":       func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"contains": strings.Contains,
	"deref":    func(b *bool) bool { return b != nil && *b },
	"plural":   plural,
}

// plural is "1 event", "2 events": n (any integer) and its noun, in the
// plural unless n is 1.
func plural(n any, one, many string) string {
	s := fmt.Sprint(n)
	if s != "1" {
		one = many
	}
	return s + " " + one
}

// ago is how long before now t was, rounded for reading.
func ago(now, t time.Time) string {
	return dur(now.Sub(t)) + " ago"
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func tsp(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return ts(*t)
}

func money(cents int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", cents/100, cents%100, strings.ToUpper(currency))
}
