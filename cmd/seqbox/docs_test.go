package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README and the docs name files that exist: every relative link,
// and every path of the checkout that a shell example reads.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append(docs, filepath.Join(root, "README.md"))
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	block := regexp.MustCompile("(?s)```(?:sh|bash)\n(.*?)```")
	// A path of the checkout: it starts with one of its top folders, or
	// it is a file of events to replay.
	path := regexp.MustCompile(`(?:^|[\s"'=])(?:\./)?((?:testdata|examples|cmd|internal|docs|\.ci)/[^\s"'` + "`" + `;|&)]+|[^\s"'` + "`" + `;|&)]+\.jsonl)`)
	checked := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(raw)
		name, _ := filepath.Rel(root, doc)
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(doc), target))
			require.NoError(t, err, "%s links to %s, which does not exist", name, target)
			checked++
		}
		for _, b := range block.FindAllStringSubmatch(text, -1) {
			for _, m := range path.FindAllStringSubmatch(b[1], -1) {
				p := strings.TrimRight(m[1], ".,:")
				if strings.ContainsAny(p, "…*$") {
					continue // a placeholder, not a file
				}
				_, err := os.Stat(filepath.Join(root, p))
				require.NoError(t, err, "a shell example of %s reads %s, which the checkout does not have", name, p)
				checked++
			}
		}
	}
	require.Greater(t, checked, 10, "the test found the links and paths it checks")
}
