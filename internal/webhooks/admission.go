package webhooks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Admission is what a request whose signature has not been verified yet
// may cost: an anonymous stranger's. Unverified bodies share one budget of
// bytes (UNVERIFIED_BODY_BYTES), paid as they arrive and given back once
// the body is verified or refused, so a request that sends its headers and
// then nothing costs none of it. The budget is shared fairly by source
// (the client's address, an IPv6 one by its /64) and by block of sources
// (see Blocks: the budget is split among the /24s and /48s reading a body,
// each one's part among its sub-blocks, down to the source's share): while
// it has room, anyone may take from it; once it is full, a source within
// its share cuts off the largest read of the source furthest beyond its
// own and is served, and a source beyond its share is refused, 503 with
// Retry-After, without reading the rest of its body. A sender with little
// in flight is thus always served, however many bytes a few other
// addresses, or the thousand addresses of one block, push.
//
// The sources table holds only the sources reading a body at the moment,
// so it is bounded by the connections the server accepts.
type Admission struct {
	limit int64

	mu   sync.Mutex
	used int64 // bytes held by unverified bodies
	// cut are the bytes held by reads already cut off and not yet given
	// back: room that is coming.
	cut     int64
	sources map[netip.Prefix]*source
	// blocks are the sources' blocks: what each one's share is.
	blocks *BlockTree
	// spare are entries of sources that left, kept for the next ones, so
	// that a sender delivering one event at a time does not allocate one
	// for each.
	spare []*source
	// freed is closed, and replaced, when bytes are given back while a
	// read waits for room.
	freed   chan struct{}
	waiters int
}

// source is one client address's (an IPv6 /64's) part of the budget.
type source struct {
	blocks Blocks
	used   int64
	cut    int64 // of used, held by reads already cut off
	reads  []*unverified
}

// admissionWait bounds how long a read within its fair share waits for the
// bytes of the reads it cut off: they give them back as soon as their
// goroutine runs, in microseconds; this is a backstop.
const admissionWait = time.Second

// Refusals of an unverified body, each answered without reading the rest.
var (
	// errOverShare: the budget is full and this source holds more than its
	// fair share of it.
	errOverShare = errors.New("unverified bodies: the budget is full and this address holds more than its share")
	// errCutOff: the read was cut off to make room for a source within its
	// share.
	errCutOff = errors.New("unverified bodies: cut off to make room for an address within its share")
	// errAdmissionBusy: the room a read within its share was promised did
	// not come back in time.
	errAdmissionBusy = errors.New("unverified bodies: no room came back in time")
)

// NewAdmission returns a budget of limit bytes for unverified bodies.
func NewAdmission(limit int64) *Admission {
	return &Admission{limit: max(limit, 1), sources: map[netip.Prefix]*source{}, blocks: NewBlockTree(),
		freed: make(chan struct{})}
}

// Used reports the bytes unverified bodies hold, and how many sources are
// reading one.
func (a *Admission) Used() (bytes int64, sources int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used, len(a.sources)
}

// share is the part of the budget s may hold (a.mu is held).
func (a *Admission) share(s *source) int64 { return a.blocks.Share(s.blocks, a.limit, 0) }

// unverified is one request's body while it is read and verified.
type unverified struct {
	adm  *Admission
	src  *source
	held int64
	// w is the request's ResponseWriter, through which the read is cut
	// off (its connection's read deadline); nil in tests that cut by hand.
	w http.ResponseWriter
	// reading: the body is still being read (only such a read is cut).
	reading bool
	// cutOff: another source's read cut this one off (guarded by adm.mu).
	cutOff bool
	// probe receives the byte that proves more of the body has arrived
	// before a buffer is paid for.
	probe [1]byte
}

// enter registers a request from the client whose blocks are b, whose
// body is about to be read. w is the request's ResponseWriter, through
// which another read may cut this one off; leave must follow.
func (a *Admission) enter(b Blocks, w http.ResponseWriter) *unverified {
	u := &unverified{adm: a, w: w, reading: true}
	a.mu.Lock()
	s := a.sources[b.Leaf()]
	if s == nil {
		if n := len(a.spare); n > 0 {
			s, a.spare = a.spare[n-1], a.spare[:n-1]
		} else {
			s = &source{}
		}
		s.blocks = b
		a.sources[b.Leaf()] = s
		a.blocks.Enter(b)
	}
	s.reads = append(s.reads, u)
	u.src = s
	a.mu.Unlock()
	return u
}

// take pays for n more bytes of the body, waiting for room (at most
// admissionWait, and not past ctx) only when the source is within its fair
// share and others are beyond theirs.
func (u *unverified) take(ctx context.Context, n int64) error {
	a := u.adm
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	a.mu.Lock()
	for {
		switch {
		case u.cutOff:
			a.mu.Unlock()
			return errCutOff
		case a.used+n <= a.limit:
			a.used += n
			u.src.used += n
			u.held += n
			a.mu.Unlock()
			return nil
		case u.src.used+n > a.share(u.src):
			a.mu.Unlock()
			return errOverShare
		}
		// Within its share, and no room: some other source holds more
		// than its share (if none did, the sum of the shares, which is
		// at most the budget, would leave room). Cut off their largest
		// reads until what is coming back makes room, and wait for it.
		for a.used-a.cut+n > a.limit && a.cutLargest(u.src) {
		}
		if timer == nil {
			timer = time.NewTimer(admissionWait)
		}
		freed := a.freed
		a.waiters++
		a.mu.Unlock()
		var err error
		select {
		case <-freed:
		case <-timer.C:
			err = errAdmissionBusy
		case <-ctx.Done():
			err = ctx.Err()
		}
		a.mu.Lock()
		a.waiters--
		if err != nil {
			a.mu.Unlock()
			return err
		}
	}
}

// cutLargest cuts off the largest read of the source furthest beyond its
// share, other than except, and reports whether there was one. A read is
// cut off by its connection's read deadline: its pending Read returns at
// once, and its bytes come back when it leaves. a.mu is held, so that the
// read cannot have left meanwhile (and its ResponseWriter gone on to
// another request).
func (a *Admission) cutLargest(except *source) bool {
	var heaviest *source
	var victim *unverified
	var most int64
	for _, s := range a.sources {
		if s == except {
			continue
		}
		beyond := s.used - s.cut - a.share(s)
		if beyond <= 0 || (heaviest != nil && beyond <= most) {
			continue
		}
		var largest *unverified
		for _, r := range s.reads {
			if r.reading && !r.cutOff && r.held > 0 && (largest == nil || r.held > largest.held) {
				largest = r
			}
		}
		if largest != nil {
			heaviest, victim, most = s, largest, beyond
		}
	}
	if victim == nil {
		return false
	}
	victim.cutOff = true
	a.cut += victim.held
	heaviest.cut += victim.held
	if victim.w != nil {
		_ = http.NewResponseController(victim.w).SetReadDeadline(time.Now())
	}
	return true
}

// doneReading says the body has been read whole: it is no longer cut off
// to make room, and its bytes come back once it is verified.
func (u *unverified) doneReading() {
	u.adm.mu.Lock()
	u.reading = false
	u.adm.mu.Unlock()
}

// leave gives back every byte the body held and forgets the request.
func (u *unverified) leave() {
	a := u.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	s := u.src
	a.used -= u.held
	s.used -= u.held
	if u.cutOff {
		a.cut -= u.held
		s.cut -= u.held
	}
	u.held = 0
	for i, r := range s.reads {
		if r == u {
			last := len(s.reads) - 1
			s.reads[i] = s.reads[last]
			s.reads[last] = nil
			s.reads = s.reads[:last]
			break
		}
	}
	if len(s.reads) == 0 {
		delete(a.sources, s.blocks.Leaf())
		a.blocks.Leave(s.blocks)
		if len(a.spare) < maxSpare && cap(s.reads) <= maxSpare {
			a.spare = append(a.spare, s)
		}
	}
	if a.waiters > 0 {
		close(a.freed)
		a.freed = make(chan struct{})
	}
}

// maxSpare bounds the spare entries kept, and the reads each may have room
// for.
const maxSpare = 64

// firstBuffer is the size of the first buffer a body of unknown or larger
// length is read into: more than most Stripe, GitHub and Paddle events,
// whose declared length (up to this) is allocated at once, in one buffer
// of exactly that size. Larger bodies grow by doubling as their bytes
// arrive, in buffers of the size classes of bodyBuffers.
const firstBuffer = 16 << 10

// bodyBuffers recycle the buffers of bodies larger than firstBuffer, by
// size class (class c holds buffers of firstBuffer<<c bytes): a buffer
// outgrown while a body is read, or whose body was refused, serves the
// next body, so that a stream of large bodies nobody signed reuses a few
// megabytes instead of leaving each body's to the collector. A verified
// body's buffer stays its delivery's. What the pools hold is at most what
// unverified bodies held at once, and the collector empties them when
// nobody asks.
var bodyBuffers [24]sync.Pool

// bufferClass is the size class of a buffer of at least size bytes.
func bufferClass(size int) (class, classSize int) {
	classSize = firstBuffer
	for classSize < size {
		classSize <<= 1
		class++
	}
	return class, classSize
}

// getBuffer returns an empty buffer of at least size bytes: exactly size
// up to firstBuffer, a size class's beyond.
func getBuffer(size int) []byte {
	if size <= firstBuffer {
		return make([]byte, 0, size)
	}
	class, classSize := bufferClass(size)
	if class < len(bodyBuffers) {
		if p, ok := bodyBuffers[class].Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, classSize)
}

// putBuffer gives a buffer of a size class back for the next body.
func putBuffer(b []byte) {
	if cap(b) <= firstBuffer {
		return
	}
	class, classSize := bufferClass(cap(b))
	if classSize != cap(b) || class >= len(bodyBuffers) {
		return
	}
	p := new([]byte) // here, not &b: b would be moved to the heap on every call
	*p = b[:0]
	bodyBuffers[class].Put(p)
}

// read reads a body whose length, if declared (every sender's:
// Content-Length, at most MAX_BODY_BYTES by now), is declared, and -1
// otherwise; r must refuse more than limit bytes (http.MaxBytesReader).
// Memory follows the bytes that arrive, never what a header claims will: a
// buffer is taken, and paid for from the budget, only once a byte proves
// the sender is sending, and a larger one only once the last is full and
// another byte has come. A body of declared length up to firstBuffer is
// read into one buffer of exactly that size; a larger one into buffers
// that double from firstBuffer up to the size class of its declared
// length (which net/http holds the sender to), each outgrown one given
// back. A body that is then refused gives its buffer back with refuse.
func (u *unverified) read(ctx context.Context, r io.Reader, declared, limit int64) ([]byte, error) {
	var buf []byte
	for {
		if declared >= 0 && int64(len(buf)) >= declared {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			// Full: wait for one more byte before paying for more room.
			n, err := readSome(r, u.probe[:])
			if n == 0 {
				if err == io.EOF {
					return buf, nil
				}
				putBuffer(buf)
				return nil, u.readError(err)
			}
			size := max(firstBuffer, 2*len(buf))
			if declared >= 0 {
				size = min(size, int(declared))
			} else {
				size = min(size, int(limit))
			}
			grown := getBuffer(size)
			if err := u.take(ctx, int64(cap(grown)-cap(buf))); err != nil {
				putBuffer(grown)
				putBuffer(buf)
				return nil, err
			}
			grown = append(grown, buf...)
			putBuffer(buf)
			buf = append(grown, u.probe[0])
			if err == io.EOF {
				return buf, nil
			} else if err != nil {
				putBuffer(buf)
				return nil, u.readError(err)
			}
			continue
		}
		// Up to the declared length: a buffer of a size class may be
		// larger.
		end := cap(buf)
		if declared >= 0 {
			end = min(end, int(declared))
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		} else if err != nil {
			putBuffer(buf)
			return nil, u.readError(err)
		}
	}
}

// refuse gives a body that was read and then refused its buffer back.
func (u *unverified) refuse(body []byte) { putBuffer(body) }

// readError is errCutOff for a read that failed because another source's
// read cut it off, err otherwise.
func (u *unverified) readError(err error) error {
	u.adm.mu.Lock()
	defer u.adm.mu.Unlock()
	if u.cutOff {
		return errCutOff
	}
	return err
}

// readSome reads into p until at least one byte or an error comes.
func readSome(r io.Reader, p []byte) (int, error) {
	for {
		n, err := r.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
}
