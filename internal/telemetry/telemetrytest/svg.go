package telemetrytest

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SVG writes spans (one trace) as a timeline, the way trace viewers draw
// it: one row per span in tree order, a bar from its start to its end on
// the root's time scale, its duration beside it; the receiver's own work
// in blue, HTTP and SMTP (server and client spans) in green, PostgreSQL in
// orange. notes are printed under it, one a line.
func SVG(w io.Writer, title string, spans []sdktrace.ReadOnlySpan, notes ...string) error {
	roots := forest(spans)
	if len(roots) == 0 {
		return fmt.Errorf("no spans")
	}
	t0, t1 := roots[0].span.StartTime(), roots[0].span.EndTime()
	for _, s := range spans {
		if s.EndTime().After(t1) {
			t1 = s.EndTime()
		}
	}
	total := t1.Sub(t0)
	const (
		labelW = 330.0
		barW   = 560.0
		rowH   = 20.0
		top    = 62.0
	)
	var rows []string
	n := 0
	walk(roots, 0, func(nd *node, depth int) {
		s := nd.span
		y := top + float64(n)*rowH
		x := labelW + barW*frac(s.StartTime().Sub(t0), total)
		wd := max(barW*frac(s.EndTime().Sub(s.StartTime()), total), 1.5)
		color := "#4e79a7" // the receiver's
		switch {
		case strings.Contains(s.InstrumentationScope().Name, "otelpgx"):
			color = "#f28e2b"
		case s.SpanKind() == trace.SpanKindServer || s.SpanKind() == trace.SpanKindClient:
			color = "#59a14f"
		}
		if n%2 == 0 {
			rows = append(rows, fmt.Sprintf(`<rect x="0" y="%.1f" width="%.1f" height="%.1f" fill="#f6f6f6"/>`, y-14, labelW+barW+90, rowH))
		}
		rows = append(rows,
			fmt.Sprintf(`<text x="%.1f" y="%.1f">%s</text>`, 8+12*float64(depth), y, html.EscapeString(s.Name())),
			fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="%.1f" height="12" rx="2" fill="%s"/>`, x, y-10, wd, color),
			fmt.Sprintf(`<text x="%.1f" y="%.1f" fill="#555">%s</text>`, x+wd+4, y, ms(s.EndTime().Sub(s.StartTime()))))
		n++
	})
	height := top + float64(n)*rowH + 14*float64(len(notes)) + 16
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="monospace" font-size="12">`+"\n",
		labelW+barW+100, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="40" x2="%.1f" y2="40" stroke="#999"/>`+"\n", labelW, labelW+barW)
	fmt.Fprintf(&b, `<text x="%.1f" y="36" fill="#555">0</text><text x="%.1f" y="36" fill="#555" text-anchor="end">%s</text>`+"\n",
		labelW, labelW+barW, ms(total))
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	for i, note := range notes {
		fmt.Fprintf(&b, `<text x="8" y="%.1f" fill="#333">%s</text>`+"\n", top+float64(n)*rowH+14*float64(i)+6, html.EscapeString(note))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func frac(d, total time.Duration) float64 {
	if total <= 0 {
		return 0
	}
	return float64(d) / float64(total)
}
