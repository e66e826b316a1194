package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// internalWords are words of the project's own notes, which mean nothing
// to an operator reading --help. "drain" is allowed only for shutdown.
var internalWords = regexp.MustCompile(`(?i:\bthe seed's\b)|\bDESIGN\b|§|internal/|\bCI\b|(?i:\bdrain(s|ed|ing)?\b)`)

// eachCommand calls fn for c and every command below it, hidden ones too.
func eachCommand(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		eachCommand(sub, fn)
	}
}

// Help texts speak to an operator: no project-internal words, and every
// --db says that it takes a postgres:// URL.
func TestHelpTexts(t *testing.T) {
	eachCommand(rootCmd(Edition{Name: "seqbox"}), func(c *cobra.Command) {
		check := func(where, text string) {
			for _, m := range internalWords.FindAllStringIndex(text, -1) {
				word := text[m[0]:m[1]]
				if strings.HasPrefix(strings.ToLower(word), "drain") && strings.Contains(text, "SIGTERM") {
					continue // the shutdown's drain
				}
				t.Errorf("%s %s: %q says %q, a word of the project's own notes", c.CommandPath(), where, text, word)
			}
		}
		check("Short", c.Short)
		check("Long", c.Long)
		c.Flags().VisitAll(func(f *pflag.Flag) {
			check("--"+f.Name, f.Usage)
			if f.Name == "db" && !strings.Contains(f.Usage, "postgres://") {
				t.Errorf("%s --db: %q does not say that it takes a postgres:// URL", c.CommandPath(), f.Usage)
			}
		})
	})
}
