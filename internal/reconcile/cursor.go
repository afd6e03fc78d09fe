package reconcile

import "time"

// Cursor is where a listing of events (Stripe's, Paddle's) stopped: the
// last event reconciled. An empty ID means "every event created before Created was reconciled" (a
// run that found nothing leaves such a cursor at the start of its window).
type Cursor struct {
	ID      string    `json:"id,omitempty"`
	Created time.Time `json:"created"`
}

// IsZero reports whether c says nothing.
func (c Cursor) IsZero() bool { return c.ID == "" && c.Created.IsZero() }

// Equal reports whether c and d are the same position.
func (c Cursor) Equal(d Cursor) bool { return c.ID == d.ID && c.Created.Equal(d.Created) }
