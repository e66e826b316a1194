package jsonkind

import "testing"

func TestOfNamesEachKind(t *testing.T) {
	for in, want := range map[byte]string{'"': "a string", '{': "an object", '[': "an array", 't': "a boolean", 'f': "a boolean", 'n': "null", '-': "a number", '7': "a number"} {
		if got := Of(in); got != want {
			t.Errorf("Of(%q) = %q, want %q", in, got, want)
		}
	}
}
