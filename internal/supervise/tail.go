package supervise

import (
	"io"
	"strings"
	"sync"
)

// Tail receives a child's output: it copies everything to an optional
// writer and keeps the last part for error messages. It is safe for
// concurrent use.
type Tail struct {
	mu   sync.Mutex
	buf  []byte
	size int
	out  io.Writer
}

// NewTail returns a Tail that keeps the last size bytes and copies
// everything to out, unless out is nil.
func NewTail(out io.Writer, size int) *Tail { return &Tail{out: out, size: size} }

// Write never fails: a failing writer must not stall the child's output.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out != nil {
		_, _ = t.out.Write(p)
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.size; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Reset forgets what is kept, so that it shows only what comes next (the
// current start).
func (t *Tail) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Lines returns the last n lines kept, without the final newline.
func (t *Tail) Lines(n int) string {
	lines := strings.Split(strings.TrimRight(t.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
