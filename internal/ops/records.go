package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// An Owner is a domain package's account to operators of the business
// rows it keeps: which of them an event concerns (Related) and which
// events a search finds through them (Search). It holds that SQL beside
// the SQL that writes its rows; this package holds none of any business
// table, so a new table is visible to operators when its owner joins the
// list the wiring hands down (wiring.Owners), this package unedited.
type Owner interface {
	// Name names its rows: their key in an event's records
	// (`server events show --json`, the console's event page and API).
	Name() string
	// Related is the look-up of the rows event e concerns, each through a
	// unique or indexed key, sent in one batch with the other owners'.
	// A zero Lookup: it keeps no rows an event shows (its Name is not
	// among the records).
	Related(e Concern) Lookup
	// Search is what it adds to the query of a search (search.go), through
	// indexes only; a zero Search adds nothing.
	Search(t *Term) Search
}

// Concern is an event as the owners look up the rows it concerns.
type Concern struct {
	Source string        // its provider's Spec.Source
	Spec   webhooks.Spec // its provider's Spec; zero when this process has none
	// EventIDs are its key and the provider's id of it: the
	// provider_event_id of the rows it wrote.
	EventIDs []string
	// IDs are the strings of its body that may be ids of business rows
	// (BodyIDs).
	IDs []string
	// ReceivedAt is its claim's time, the now() of its transaction: the
	// created_at or updated_at of a row that transaction wrote.
	ReceivedAt time.Time
}

// Lookup is one query of an owner's rows: SQL with its arguments, and how
// a row of its result is read.
type Lookup struct {
	SQL  string
	Args []any
	Row  func(pgx.CollectableRow) (Row, error)
}

// A Row is one business row as operators see it: its JSON is what an
// event's records carry, its Line what the console's and the CLI's tables
// show of it.
type Row interface {
	Line() Line
}

// Line is a business row in the operators' tables (the console's event
// page, `server events show`): a column each, then notes.
type Line struct {
	Kind     string // "order #12", "invoice", "refund", …
	Source   string // its provider's source; "" when the row keeps none
	ID       string // its id at the provider (cs_…, in_…, a charge's ch_…)
	Status   string
	Amount   string // as Money writes it; "" none
	Refunded string // what was refunded of Amount, as Money writes it; "" none
	Customer string // its customer's email or id; "" none
	// Notes are what else an operator reads of it, in order: its payment,
	// plan, account, what was refunded, dates.
	Notes   []Note
	Updated time.Time // when it last changed; zero: not kept
	AsOf    string    // the event that last changed it, where it keeps one
	Wrote   bool      // the event wrote it; else its body names it
}

// Note is one fact of a Line: a label and a text, or a label and a time
// (which each reader writes its own way).
type Note struct {
	Label string
	Text  string
	At    *time.Time
}

// Notes are the notes of ns that say something (a text or a time).
func Notes(ns ...Note) []Note {
	var out []Note
	for _, n := range ns {
		if n.Text != "" || n.At != nil {
			out = append(out, n)
		}
	}
	return out
}

// Money writes an amount in a currency's minor unit: "25.00 USD".
func Money(cents int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", cents/100, cents%100, strings.ToUpper(currency))
}

// Rows are one owner's rows of an event's records.
type Rows struct {
	Name string
	Rows []Row
}

// Records are the business rows an event concerns, by owner, in the order
// of the owners it was read with. Their JSON is an object of each owner's
// rows by its Name: {"orders": [...], "invoices": [...], ...}.
type Records []Rows

// Empty reports whether there are no records at all.
func (r Records) Empty() bool {
	for _, rows := range r {
		if len(rows.Rows) > 0 {
			return false
		}
	}
	return true
}

// Lines are every row of r as the tables show it, in r's order.
func (r Records) Lines() []Line {
	var out []Line
	for _, rows := range r {
		for _, row := range rows.Rows {
			out = append(out, row.Line())
		}
	}
	return out
}

// MarshalJSON writes r as an object of each owner's rows by its Name, in
// r's order.
func (r Records) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, rows := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(rows.Name)
		b.Write(name)
		b.WriteByte(':')
		list := rows.Rows
		if list == nil {
			list = []Row{}
		}
		v, err := json.Marshal(list)
		if err != nil {
			return nil, fmt.Errorf("records %s: %w", rows.Name, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// maxBodyIDs bounds the ids taken from a body for the look-ups.
const maxBodyIDs = 200

// BodyIDs returns the strings of a JSON body that may be ids of business
// rows (every short string without spaces, and "account:<id>" for a
// marketplace account's numeric id), at most maxBodyIDs of them, in the
// order met.
func BodyIDs(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var ids []string
	add := func(s string) {
		if len(ids) < maxBodyIDs && len(s) >= 3 && len(s) <= 255 && !slices.Contains(ids, s) {
			ids = append(ids, s)
		}
	}
	var walk func(v any, parent string, depth int)
	walk = func(v any, parent string, depth int) {
		if depth > 8 || len(ids) >= maxBodyIDs {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "id" && parent == "account" {
					if n, ok := c.(float64); ok {
						add("account:" + strconv.FormatInt(int64(n), 10))
					}
				}
				walk(c, k, depth+1)
			}
		case []any:
			for _, c := range x {
				walk(c, parent, depth+1)
			}
		case string:
			for _, r := range x {
				if r == ' ' || r == '\n' || r == '\t' {
					return
				}
			}
			add(x)
		}
	}
	walk(v, "", 0)
	return ids
}

// Related reads the business rows the event d concerns from each owner,
// in one round trip: the owners' look-ups in one batch, each through a
// unique or indexed key (orders it created or whose business key or
// payment its body names, invoices its body names, refunds it recorded,
// …, as each owner says); specs are the providers.
func Related(ctx context.Context, q webhooks.Querier, d Detail, specs []webhooks.Spec, owners []Owner) (Records, error) {
	e := Concern{Source: d.Source, EventIDs: []string{d.Key, d.EventID}, IDs: BodyIDs(d.Body), ReceivedAt: d.ReceivedAt}
	for _, s := range specs {
		if s.Source == d.Source {
			e.Spec = s
		}
	}
	type queued struct {
		name string
		row  func(pgx.CollectableRow) (Row, error)
	}
	var looked []queued
	b := &pgx.Batch{}
	for _, o := range owners {
		l := o.Related(e)
		if l.SQL == "" {
			continue
		}
		b.Queue(l.SQL, l.Args...)
		looked = append(looked, queued{o.Name(), l.Row})
	}
	if len(looked) == 0 {
		return Records{}, nil
	}
	br := q.SendBatch(ctx, b)
	defer br.Close()
	r := make(Records, 0, len(looked))
	for _, l := range looked {
		rows, err := br.Query()
		var found []Row
		if err == nil {
			found, err = pgx.CollectRows(rows, l.row)
		}
		if err != nil {
			return Records{}, fmt.Errorf("%s of %s: %w", l.name, d.Key, err)
		}
		r = append(r, Rows{Name: l.name, Rows: found})
	}
	return r, br.Close()
}
