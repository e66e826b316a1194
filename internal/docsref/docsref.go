// Package docsref checks what the repository's Go comments and Markdown
// documents cite, so that each citation points at something that exists:
//
//   - a section of docs/design.md or of the benchmark log: docs/design.md
//     §5, docs/design.md §10.1, §10.2, docs/benchmarks-history.md §17. In a
//     document, a bare § is a section of its own. The section must exist.
//   - a heading or bold lead-in, quoted after the document or the section:
//     docs/design.md, "The agent path"; docs/design.md §5, "Ordering gate".
//     It must be one of that section (of the document, without a section).
//   - a step of the pipeline: Go comments and the other documents name it,
//     as above; docs/design.md may number its own, and the numbers must be
//     steps of the section.
//   - a path of the repository (internal/serve/agent.go,
//     store/storetest/..., batchsize.go) and a Markdown link's target and
//     #anchor.
//
// Another document's sections (the external specification's DESIGN §3,
// RFC 4648 §4) are left alone. TestDocsRefs runs Check over the repository.
package docsref

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Problem is one citation that points nowhere.
type Problem struct {
	File string // relative to the root, with slashes
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// The documents whose sections are cited, by the names a citation uses.
var docFiles = map[string]string{
	"design":             "docs/design.md",
	"benchmarks":         "docs/benchmarks.md",
	"benchmarks-history": "docs/benchmarks-history.md",
}

// Names that look like paths of the repository but are none of its files:
// the external specification the project started from (docs/design.md
// §21), and rapid's fail files, written only when a run fails.
var external = map[string]bool{"DESIGN.md": true, "testdata/rapid": true}

// The benchmark log records what was measured when: the names it cites
// are as of their date, and it is not edited. Its sections are cited.
const logFile = "docs/benchmarks-history.md"

const (
	num     = `\d+(?:\.\d+)*`
	listSep = `(?:\s*[-–,]\s*|\s+(?:to|and)\s+|,\s+and\s+)`
	docName = `\[?(?:docs/)?(?:design|benchmarks-history|benchmarks)\.md|\bbenchmarks-history\b|\bbenchmarks\b|shared/DESIGN\.md|\bDESIGN(?:\.md)?|\bRFC\s+\d+`
	quoted  = `["“][^"”]{1,80}["”]`
	// One quoted name or several: "Business key", "Handler" and "Advance".
	names = `(` + quoted + `(?:(?:,\s*|,?\s+and\s+)` + quoted + `)*)`
)

var (
	// A list of sections, with the document before it (optional), the
	// steps before or after it, and a quoted name after it.
	citeRe = regexp.MustCompile(
		`(?:\bsteps?\s+(\d+(?:` + listSep + `\d+)*)\s+of\s+(?:the\s+)?)?` + // 1 steps before
			`(?:(` + docName + `)(?:\]\([^)\s]*\))?,?\s*)?` + // 2 document
			`(§` + num + `(?:` + listSep + `§` + num + `)*)` + // 3 sections
			`(?:,?\s+steps?\s+(\d+(?:` + listSep + `\d+)*))?` + // 4 steps after
			`(?:,?\s*` + names + `)?`) // 5 names
	// A document and a quoted name, no section.
	namedRe    = regexp.MustCompile(`(` + docName + `)(?:\]\([^)\s]*\))?,?\s*` + names)
	quotedRe   = regexp.MustCompile(`["“]([^"”]{1,80})["”]`)
	sectionRe  = regexp.MustCompile(`§(` + num + `)`)
	stepNumRe  = regexp.MustCompile(`\d+`)
	headingRe  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*$`)
	numberedRe = regexp.MustCompile(`^§?(` + num + `)\.?\s+(.*)$`)
	boldRe     = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	stepRe     = regexp.MustCompile(`^\s*(\d+)\.\s+\*\*`)
	linkTextRe = regexp.MustCompile(`\[[^\]]*\]\(`)
	linkRe     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pathRe     = regexp.MustCompile(`[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-*…]+)+/?(?:#[a-z0-9_\-]+)?|[A-Za-z0-9_\-]+\.(?:go|md)\b`)
	qualified  = regexp.MustCompile(`\.[A-Z]\w*$`) // internal/ddl.Ensure
	fileExt    = regexp.MustCompile(`\.(?:go|md|sql|jsonl?|ya?ml|sh|py|mod|sum|toml|txt|html|js|css)$`)
)

// section is a numbered heading and what it holds, subsections included.
type section struct {
	title string
	names map[string]bool // its headings and bold lead-ins, normalized
	steps map[int]bool    // its numbered steps ("8. **Ordering gate**")
}

// document is a Markdown file as a citation sees it.
type document struct {
	sections map[string]*section
	names    map[string]bool
	anchors  map[string]bool
}

type checker struct {
	root     string
	top      map[string]bool // the root's entries
	base     map[string]bool // every file's name, anywhere
	docs     map[string]*document
	problems []Problem
}

// Check walks root (skipping .git, node_modules, vendor and testdata) and
// returns every citation of its .go and .md files that points nowhere.
func Check(root string) ([]Problem, error) {
	c := &checker{root: root, top: map[string]bool{}, base: map[string]bool{}, docs: map[string]*document{}}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		c.top[e.Name()] = true
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor", "testdata":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		c.base[d.Name()] = true
		if strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == logFile {
			continue
		}
		if strings.HasSuffix(path, ".go") {
			for _, b := range goComments(raw) {
				c.checkText(rel, b)
			}
		} else {
			c.checkText(rel, markdownText(raw))
		}
	}
	sort.SliceStable(c.problems, func(i, j int) bool {
		a, b := c.problems[i], c.problems[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return c.problems, nil
}

// text is a comment block or a document with its lines joined by spaces,
// so that a citation broken over two lines is one; lines maps it back.
type text struct {
	s      string
	starts []int // offset in s where each line begins
	lines  []int // that line's number in the file
}

func (t *text) add(line int, s string) {
	if len(t.starts) > 0 {
		t.s += " "
	}
	t.starts = append(t.starts, len(t.s))
	t.lines = append(t.lines, line)
	t.s += s
}

func (t *text) line(off int) int {
	i := sort.SearchInts(t.starts, off+1) - 1
	if i < 0 {
		i = 0
	}
	return t.lines[i]
}

// goComments returns the file's comments, consecutive line comments as
// one block. Code is not read: its strings are not citations.
func goComments(src []byte) []*text {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	var blocks []*text
	var cur *text
	last := -1
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		line := fset.Position(pos).Line
		if strings.HasPrefix(lit, "//") {
			if cur == nil || line != last+1 {
				cur = &text{}
				blocks = append(blocks, cur)
			}
			cur.add(line, strings.TrimSpace(strings.TrimPrefix(lit, "//")))
			last = line
			continue
		}
		cur = nil
		b := &text{}
		for i, l := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/"), "\n") {
			b.add(line+i, strings.TrimSpace(l))
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// markdownText is a document without its headings (they define, not cite).
func markdownText(src []byte) *text {
	t := &text{}
	for i, l := range strings.Split(string(src), "\n") {
		if headingRe.MatchString(l) {
			l = ""
		}
		t.add(i+1, l)
	}
	return t
}

func (c *checker) report(file string, line int, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// docKey is the document a citation's name means; "" for another's.
func docKey(name string) string {
	name = strings.TrimPrefix(name, "[")
	name = strings.TrimPrefix(name, "docs/")
	name = strings.TrimSuffix(name, ".md")
	if _, ok := docFiles[name]; ok {
		return name
	}
	return ""
}

// selfKey is the document a bare "§n" of file means.
func selfKey(file string) string {
	for k, f := range docFiles {
		if f == file {
			return k
		}
	}
	return ""
}

func (c *checker) checkText(file string, t *text) {
	isGo := strings.HasSuffix(file, ".go")
	linkTexts := linkTextRe.FindAllStringIndex(t.s, -1)
	for _, m := range citeRe.FindAllStringSubmatchIndex(t.s, -1) {
		group := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return t.s[m[2*i]:m[2*i+1]]
		}
		line := t.line(m[6])
		if inside(linkTexts, m[6]) {
			continue // a link's text: its target is checked
		}
		key := selfKey(file)
		if d := group(2); d != "" {
			key = docKey(d)
			if key == "" {
				continue // another document's section
			}
		}
		if key == "" {
			c.report(file, line, "%s names no document: write docs/design.md %s (or the document meant)", group(3), group(3))
			continue
		}
		doc := c.doc(key)
		if doc == nil {
			c.report(file, line, "%s cites %s, which does not exist", group(3), docFiles[key])
			continue
		}
		var secs []*section
		for _, s := range sectionRe.FindAllStringSubmatch(group(3), -1) {
			sec := doc.sections[s[1]]
			if sec == nil {
				c.report(file, line, "%s §%s does not exist", docFiles[key], s[1])
				continue
			}
			secs = append(secs, sec)
		}
		for _, steps := range []string{group(1), group(4)} {
			if steps == "" {
				continue
			}
			if file != docFiles[key] {
				c.report(file, line, "%s cites a step by number (%q): name it in quotes, as in %s, \"Ordering gate\"", group(3), strings.TrimSpace(t.s[m[0]:m[1]]), group(3))
				continue
			}
			for _, n := range stepNumRe.FindAllString(steps, -1) {
				k, _ := strconv.Atoi(n)
				ok := false
				for _, sec := range secs {
					ok = ok || sec.steps[k]
				}
				if !ok {
					c.report(file, line, "%s has no step %d", group(3), k)
				}
			}
		}
		for _, q := range quotedRe.FindAllStringSubmatch(group(5), -1) {
			if len(secs) == 0 {
				break
			}
			name, ok := q[1], false
			for _, sec := range secs {
				ok = ok || sec.names[normal(name)]
			}
			if !ok {
				c.report(file, line, "%q is not a heading or bold lead-in of %s %s (its heading: %q)", name, docFiles[key], group(3), secs[0].title)
			}
		}
	}
	for _, m := range namedRe.FindAllStringSubmatchIndex(t.s, -1) {
		key := docKey(t.s[m[2]:m[3]])
		if key == "" {
			continue
		}
		line := t.line(m[4])
		doc := c.doc(key)
		for _, q := range quotedRe.FindAllStringSubmatch(t.s[m[4]:m[5]], -1) {
			if doc == nil {
				c.report(file, line, "%q cites %s, which does not exist", q[1], docFiles[key])
			} else if !doc.names[normal(q[1])] {
				c.report(file, line, "%s has no heading or bold lead-in %q", docFiles[key], q[1])
			}
		}
	}
	c.checkPaths(file, t, isGo)
}

// inside reports whether off falls in one of spans.
func inside(spans [][]int, off int) bool {
	for _, s := range spans {
		if s[0] <= off && off < s[1] {
			return true
		}
	}
	return false
}

// checkPaths checks Markdown links and the paths of the repository named.
func (c *checker) checkPaths(file string, t *text, isGo bool) {
	dir := filepath.Dir(filepath.Join(c.root, file))
	for _, m := range linkRe.FindAllStringSubmatchIndex(t.s, -1) {
		target := t.s[m[2]:m[3]]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		c.checkTarget(file, t.line(m[2]), dir, target, true)
	}
	for _, m := range pathRe.FindAllStringIndex(t.s, -1) {
		p := t.s[m[0]:m[1]]
		if m[0] > 0 && strings.ContainsAny(t.s[m[0]-1:m[0]], "/:@$~{%<=+\\") {
			continue // an absolute path, a URL, a variable
		}
		if m[0] > 1 && t.s[m[0]-2:m[0]] == "](" {
			continue // a link's target, checked above
		}
		if m[1] < len(t.s) && strings.ContainsAny(t.s[m[1]:m[1]+1], "/(") {
			continue
		}
		p = strings.TrimRight(p, ".")
		first, _, _ := strings.Cut(p, "/")
		local := strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
		if !local && !c.top[first] && !fileExt.MatchString(strings.SplitN(p, "#", 2)[0]) {
			continue // not a path of this repository
		}
		if strings.Contains(first, ".") && !local && !c.top[first] && strings.Contains(p, "/") {
			continue // a host: github.com/…, example.com/…
		}
		if external[p] || strings.Contains(p, "NNN") {
			continue // see external; a placeholder
		}
		if !fileExt.MatchString(p) {
			p = qualified.ReplaceAllString(p, "") // a package's identifier
		}
		c.checkTarget(file, t.line(m[0]), dir, p, false)
	}
}

// checkTarget reports target unless it is a file or folder of the
// repository, relative to the citing file's folder (and, for a path named
// in text, to the root, or any file of that name when it has no folder).
func (c *checker) checkTarget(file string, line int, dir, target string, link bool) {
	path, anchor, _ := strings.Cut(target, "#")
	check := path
	if i := strings.Index(check, "…"); i >= 0 {
		check = check[:i]
	}
	check = strings.TrimSuffix(check, "/...")
	check = strings.TrimSuffix(check, "/")
	var found string
	if check == "" {
		found = filepath.Join(c.root, file)
	} else {
		bases := []string{dir}
		if !link {
			bases = append(bases, c.root)
		}
		for _, b := range bases {
			if matches, _ := filepath.Glob(filepath.Join(b, filepath.FromSlash(check))); len(matches) > 0 {
				found = matches[0]
				break
			}
		}
		if found == "" && !link && !strings.Contains(check, "/") && c.base[check] {
			return
		}
	}
	if found == "" {
		c.report(file, line, "%s does not exist", target)
		return
	}
	if anchor == "" || !strings.HasSuffix(found, ".md") {
		return
	}
	doc := c.load(found)
	if doc == nil || !doc.anchors[anchor] {
		c.report(file, line, "%s has no heading #%s", path, anchor)
	}
}

func (c *checker) doc(key string) *document {
	return c.load(filepath.Join(c.root, filepath.FromSlash(docFiles[key])))
}

// load parses a Markdown document once.
func (c *checker) load(path string) *document {
	if d, ok := c.docs[path]; ok {
		return d
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		c.docs[path] = nil
		return nil
	}
	d := parse(string(raw))
	c.docs[path] = d
	return d
}

// parse reads a document's numbered sections, names and anchors.
func parse(src string) *document {
	d := &document{sections: map[string]*section{}, names: map[string]bool{}, anchors: map[string]bool{}}
	type open struct {
		level int
		sec   *section
	}
	var stack []open
	slugs := map[string]int{}
	fence := false
	for _, l := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		var names []string
		if h := headingRe.FindStringSubmatch(l); h != nil {
			level, title := len(h[1]), h[2]
			s := slug(title)
			if n := slugs[s]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				d.anchors[s] = true
			}
			slugs[s]++
			for len(stack) > 0 && stack[len(stack)-1].level >= level {
				stack = stack[:len(stack)-1]
			}
			if n := numberedRe.FindStringSubmatch(title); n != nil {
				sec := &section{title: n[2], names: map[string]bool{}, steps: map[int]bool{}}
				d.sections[n[1]] = sec
				stack = append(stack, open{level, sec})
				title = n[2]
			}
			names = append(names, title)
		}
		for _, b := range boldRe.FindAllStringSubmatch(l, -1) {
			names = append(names, b[1])
		}
		for _, n := range names {
			d.names[normal(n)] = true
			for _, o := range stack {
				o.sec.names[normal(n)] = true
			}
		}
		if s := stepRe.FindStringSubmatch(l); s != nil && len(stack) > 0 {
			k, _ := strconv.Atoi(s[1])
			stack[len(stack)-1].sec.steps[k] = true
		}
	}
	return d
}

// normal is a name as compared: no backticks, no closing punctuation, one
// space between words, lower case.
func normal(s string) string {
	s = strings.ReplaceAll(s, "`", "")
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimRight(s, ".:,;")
	return strings.ToLower(s)
}

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' || r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
