package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionPrintsTheBuild(t *testing.T) {
	out := ok(t, "version")
	require.Regexp(t, `^seqbox \S+\n\z`, out)
	require.Equal(t, out, ok(t, "--version"), "--version says the same")
}
