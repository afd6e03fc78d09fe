package webhooks

import (
	"bytes"
	"sync"
	"unicode/utf8"
)

// scanNames is RepeatedName's fast path: one pass over body's bytes that
// tracks the member names of every open object, without allocating
// (its buffers come from a pool), where json/v2's validator keeps a map of
// copied names for every object of more than 64 members (loadgen's
// invoice.created has 69 in data.object): that was 15 % of the receiver's
// CPU per new event.
//
// It is sure only of bodies it read to the end as JSON, every name plain
// (no escape, valid UTF-8, so that two names are the same exactly when
// their bytes are): then repeats says whether an object repeats a name.
// Any other body (an escaped name, bytes that are no JSON) is left to
// json/v2 (sure is false). It does not validate what it does not need to
// (numbers, literals, the bytes of string values): a body it is sure has
// no repeated name may still be no JSON, which the provider's decoding
// judges, as RepeatedName's contract says.
func scanNames(body []byte) (repeats, sure bool) {
	s := scanPool.Get().(*nameScan)
	repeats, sure = s.scan(body)
	if cap(s.frames) <= 1024 && cap(s.names) <= 4096 && cap(s.table) <= 8192 {
		scanPool.Put(s)
	}
	return repeats, sure
}

var scanPool = sync.Pool{New: func() any { return new(nameScan) }}

type nameScan struct {
	frames []scanFrame
	names  []nameSpan // the names of every open object, innermost last
	table  []int32    // repeated's hash table: indexes into an object's names, -1 for none
}

type scanFrame struct {
	object bool
	first  int // the object's first name in names
}

// nameSpan is a name's bytes in body, without quotes, and their hash.
type nameSpan struct {
	start, end int
	hash       uint32
}

func (s *nameScan) scan(b []byte) (repeats, sure bool) {
	s.frames, s.names = s.frames[:0], s.names[:0]
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false, false
		}
		switch c := b[i]; c {
		case '{':
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			s.frames = append(s.frames, scanFrame{object: true, first: len(s.names)})
			var ok bool
			if i, ok = s.name(b, i); !ok {
				return false, false
			}
			continue
		case '[':
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			s.frames = append(s.frames, scanFrame{})
			continue
		case '"':
			end := stringEnd(b, i)
			if end < 0 {
				return false, false
			}
			i = end
		default:
			j := i
			for j < len(b) && !isDelimiter(b[j]) {
				j++
			}
			if j == i {
				return false, false
			}
			i = j
		}
		// A value ended at i: close what it ends, find where the next starts.
		for next := false; !next; {
			i = skipSpace(b, i)
			if len(s.frames) == 0 {
				return false, i == len(b)
			}
			if i >= len(b) {
				return false, false
			}
			f := s.frames[len(s.frames)-1]
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
				if f.object {
					var ok bool
					if i, ok = s.name(b, i); !ok {
						return false, false
					}
				}
				next = true
			case '}':
				if !f.object {
					return false, false
				}
				if s.repeated(b, s.names[f.first:]) {
					return true, true
				}
				s.names = s.names[:f.first]
				s.frames = s.frames[:len(s.frames)-1]
				i++
			case ']':
				if f.object {
					return false, false
				}
				s.frames = s.frames[:len(s.frames)-1]
				i++
			default:
				return false, false
			}
		}
	}
}

// name reads a member name and its colon at i (space skipped before it),
// and returns where the member's value starts; false for anything but a
// plain name.
func (s *nameScan) name(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	end := stringEnd(b, i)
	if end < 0 {
		return i, false
	}
	h := uint32(2166136261) // FNV-1a
	for _, c := range b[i+1 : end-1] {
		if c == '\\' || c >= utf8.RuneSelf {
			if c == '\\' || !utf8.Valid(b[i+1:end-1]) {
				return i, false
			}
		}
		h = (h ^ uint32(c)) * 16777619
	}
	s.names = append(s.names, nameSpan{i + 1, end - 1, h})
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// repeated reports whether two of one object's names are the same bytes:
// pair by pair for a few, through a hash table for more.
func (s *nameScan) repeated(b []byte, names []nameSpan) bool {
	same := func(x, y nameSpan) bool { return x.hash == y.hash && bytes.Equal(b[x.start:x.end], b[y.start:y.end]) }
	if len(names) <= 8 {
		for j := 1; j < len(names); j++ {
			for k := range j {
				if same(names[j], names[k]) {
					return true
				}
			}
		}
		return false
	}
	size := 16
	for size < 2*len(names) {
		size *= 2
	}
	if cap(s.table) < size {
		s.table = make([]int32, size)
	}
	t := s.table[:size]
	for j := range t {
		t[j] = -1
	}
	mask := uint32(size - 1)
	for j, n := range names {
		for h := n.hash & mask; ; h = (h + 1) & mask {
			if t[h] < 0 {
				t[h] = int32(j)
				break
			}
			if same(names[t[h]], n) {
				return true
			}
		}
	}
	return false
}

// stringEnd returns the index just past the closing quote of the string
// that starts at b[i] ('"'), or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1
		}
		q += j
		k := q - 1
		for k > i && b[k] == '\\' {
			k--
		}
		if (q-1-k)%2 == 0 { // an even number of backslashes: the quote is not escaped
			return q + 1
		}
		j = q + 1
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', ':', '{', '}', '[', ']', '"', ' ', '\n', '\r', '\t':
		return true
	}
	return false
}

// LeadingScalar returns the raw value of the top-level member name of a
// JSON object when it comes before any member whose value is an object or
// an array, and is itself a number, true, false or null (a string's value
// is returned with its quotes): what a provider can read of an envelope
// without decoding it, when the sender writes its scalars first (Stripe:
// id, object, api_version, created, then data). It reads a few dozen
// bytes and allocates nothing. Not found, or anything unexpected (an
// escaped name, bytes that are no JSON), is false: a hint only, which the
// caller confirms from its decode.
func LeadingScalar(body []byte, name string) ([]byte, bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	for i = skipSpace(body, i+1); i < len(body) && body[i] == '"'; {
		end := stringEnd(body, i)
		if end < 0 || bytes.IndexByte(body[i+1:end-1], '\\') >= 0 {
			return nil, false
		}
		member := body[i+1 : end-1]
		if i = skipSpace(body, end); i >= len(body) || body[i] != ':' {
			return nil, false
		}
		i = skipSpace(body, i+1)
		start := i
		switch {
		case i >= len(body) || body[i] == '{' || body[i] == '[':
			return nil, false
		case body[i] == '"':
			if i = stringEnd(body, i); i < 0 {
				return nil, false
			}
		default:
			for i < len(body) && !isDelimiter(body[i]) {
				i++
			}
		}
		if string(member) == name {
			return body[start:i], start < i
		}
		if i = skipSpace(body, i); i >= len(body) || body[i] != ',' {
			return nil, false
		}
		i = skipSpace(body, i+1)
	}
	return nil, false
}
