package conformance

import (
	"slices"
	"testing"
)

func TestFewOrders(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want [][]string
	}{
		{[]string{"a"}, [][]string{}},
		{[]string{"a", "b"}, [][]string{{"b", "a"}}},
		{[]string{"a", "b", "c"}, [][]string{{"c", "b", "a"}, {"b", "c", "a"}, {"c", "a", "b"}}},
		{[]string{"a", "b", "c", "d"}, [][]string{{"d", "c", "b", "a"}, {"b", "c", "d", "a"}, {"c", "d", "a", "b"}, {"d", "a", "b", "c"}}},
	} {
		got := fewOrders(c.in)
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("fewOrders(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if n := len(Permutations([]string{"a", "b", "c", "d"})); n != 24 {
		t.Errorf("%d permutations of 4, want 24", n)
	}
}
