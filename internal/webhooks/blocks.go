package webhooks

import (
	"net/netip"
	"slices"
)

// Blocks are the blocks of addresses a client address is counted in, the
// coarsest first: an IPv4 address (an IPv4-mapped IPv6 one included, and
// loopback's 127.0.0.0/8 like any other) in its /24 and then by itself; an
// IPv6 address in its /48, its /56 and its /64 (what one host, one
// customer's site and one customer of a provider are usually given).
// Anything that is not an address is one block of its own.
//
// A budget shared by blocks (unverified body bytes, unverified
// connections) is split equally among the top blocks (/24s and /48s)
// holding some of it, and each block's part equally among its sub-blocks
// holding some: however many addresses a /24 or a /48 uses, together they
// get one block's part, and a sender that shares a /24 with an attacker
// keeps its own part of it.
type Blocks struct {
	n int
	p [3]netip.Prefix
}

// BlocksOf returns the blocks a is counted in.
func BlocksOf(a netip.Addr) Blocks {
	a = a.Unmap().WithZone("")
	var b Blocks
	var bits []int
	switch {
	case a.Is4():
		bits = []int{24, 32}
	case a.Is6():
		bits = []int{48, 56, 64}
	default:
		b.n = 1 // the zero prefix
		return b
	}
	for i, n := range bits {
		b.p[i], _ = a.Prefix(n)
	}
	b.n = len(bits)
	return b
}

// BlocksOfString returns the blocks an address given as text is counted
// in; anything that is not an address shares one block.
func BlocksOfString(addr string) Blocks {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return BlocksOf(netip.Addr{})
	}
	return BlocksOf(a)
}

// Leaf is the finest block: the IPv4 address, the IPv6 /64.
func (b Blocks) Leaf() netip.Prefix { return b.p[b.n-1] }

// Path is the blocks, the coarsest first.
func (b Blocks) Path() []netip.Prefix { return slices.Clone(b.p[:b.n]) }

// BlockTree is the blocks holding some of a budget, each with how many of
// its sub-blocks do: what a block's part of the budget is computed from.
// It is not safe for concurrent use: its owner's lock guards it.
type BlockTree struct {
	nodes map[netip.Prefix]*blockNode
	top   int // top blocks present
	spare []*blockNode
}

// blockNode is a block holding some of the budget.
type blockNode struct {
	children int // sub-blocks present
	holders  int // entries (reads, connections) of its addresses
}

// NewBlockTree returns an empty tree.
func NewBlockTree() *BlockTree { return &BlockTree{nodes: map[netip.Prefix]*blockNode{}} }

// Enter counts one more holder in b's blocks.
func (t *BlockTree) Enter(b Blocks) {
	for i := range b.n {
		p := b.p[i]
		n := t.nodes[p]
		if n == nil {
			if k := len(t.spare); k > 0 {
				n, t.spare = t.spare[k-1], t.spare[:k-1]
			} else {
				n = &blockNode{}
			}
			t.nodes[p] = n
			if i == 0 {
				t.top++
			} else {
				t.nodes[b.p[i-1]].children++
			}
		}
		n.holders++
	}
}

// Leave counts one holder of b's blocks out; a block holding nothing
// leaves the tree.
func (t *BlockTree) Leave(b Blocks) {
	for i := b.n - 1; i >= 0; i-- {
		p := b.p[i]
		n := t.nodes[p]
		if n == nil {
			continue
		}
		if n.holders--; n.holders > 0 {
			continue
		}
		delete(t.nodes, p)
		if i == 0 {
			t.top--
		} else if parent := t.nodes[b.p[i-1]]; parent != nil {
			parent.children--
		}
		if len(t.spare) < maxSpare {
			*n = blockNode{}
			t.spare = append(t.spare, n)
		}
	}
}

// Holders is how many holders b's finest block counts.
func (t *BlockTree) Holders(b Blocks) int {
	if n := t.nodes[b.Leaf()]; n != nil {
		return n.holders
	}
	return 0
}

// Top is how many top blocks (/24s, /48s) hold some of the budget.
func (t *BlockTree) Top() int { return t.top }

// Share is the part of total that b's finest block may hold: total split
// equally among the top blocks present and reserve more, then each
// block's part among its sub-blocks present. A block of b's not present
// counts as one more where it would be (a newcomer's share).
func (t *BlockTree) Share(b Blocks, total int64, reserve int) int64 {
	var share int64
	t.walk(b, total, reserve, func(_, s int64) bool {
		share = s
		return true
	})
	return share
}

// Admits reports whether b's finest block may count one more holder: it
// holds fewer than its share (as Share computes it); or, a share being
// smaller than least, it and each of its blocks hold fewer than least or
// than their own part. However finely the budget is split, an address
// thus gets least, unless its block already holds its part: a thousand
// addresses of one block do not each get least.
func (t *BlockTree) Admits(b Blocks, total int64, reserve int, least int64) bool {
	ok := true
	var leaf, leafShare int64
	t.walk(b, total, reserve, func(holders, share int64) bool {
		leaf, leafShare = holders, share
		if holders >= max(share, least) {
			ok = false
		}
		return true
	})
	return leaf < leafShare || ok
}

// walk calls f with each of b's blocks, the coarsest first: how many
// holders it counts, and its part of total; until f returns false.
func (t *BlockTree) walk(b Blocks, total int64, reserve int, f func(holders, share int64) bool) {
	share := total
	var parent *blockNode
	for i := range b.n {
		n := t.nodes[b.p[i]]
		var among, holders int
		switch {
		case i == 0:
			among = t.top + reserve
		case parent != nil:
			among = parent.children
		}
		if n == nil {
			among++
		} else {
			holders = n.holders
		}
		share /= int64(max(among, 1))
		if !f(int64(holders), share) {
			return
		}
		parent = n
	}
}
