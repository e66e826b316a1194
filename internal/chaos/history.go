package chaos

import (
	"fmt"
	"sort"
	"strings"
)

// Apply is one entry of a history: an effect that a handler (or an agent,
// or a remote API) applied, in commit order. Only the order of the entries
// of one partition key is meaningful: across keys, the logs the harness
// reads are not in commit order.
type Apply struct {
	Source, ID string
	// Key is the partition key ("" for an event ordered by nothing).
	Key         string
	BusinessKey string
	// Version is the objectversion when Versioned.
	Version   int64
	Versioned bool
}

func (a Apply) identity() string { return a.Source + "/" + a.ID }

func (a Apply) describe(i int) string {
	if a.Versioned {
		return fmt.Sprintf("apply #%d %s (v%d)", i+1, a.identity(), a.Version)
	}
	return fmt.Sprintf("apply #%d %s (no version)", i+1, a.identity())
}

// HistorySpec is what a history is checked against besides the sequential
// specification of a key.
type HistorySpec struct {
	// FirstVersion is the consumer's FirstVersion (nil: a key's first
	// version seen is its baseline, and nothing before it is checked).
	FirstVersion *int64
	// Accounted is what the database recorded of versions that never
	// applied (nil: nothing).
	Accounted *Accounting
	// PublishOrder lists, for the keys whose events a single producer
	// published one after the other and whose delivery order the harness
	// guarantees, their identities ("source/id") in publish order.
	PublishOrder map[string][]string
}

// CheckHistory checks a history against the sequential specification of a
// key and returns one readable message per violation, naming the key and
// the offending pair of applies (#n is an entry's position in h):
//
//   - each identity is applied at most once, and at most one identity per
//     business key;
//   - a key's versions strictly increase, never below FirstVersion;
//   - a version skipped between two applies of a key (or before its first
//     apply when FirstVersion is set) is accounted for by spec.Accounted;
//   - a key listed in spec.PublishOrder is applied in that order.
func CheckHistory(h []Apply, spec HistorySpec) []string {
	var out []string
	byID, byBK := map[string]int{}, map[string]int{}
	perKey := map[string][]int{}
	for i, a := range h {
		if j, seen := byID[a.identity()]; seen {
			out = append(out, fmt.Sprintf("%s: %s applied twice: %s and %s", keyText(a.Key), a.identity(), h[j].describe(j), a.describe(i)))
		} else {
			byID[a.identity()] = i
		}
		if a.BusinessKey != "" {
			if j, seen := byBK[a.BusinessKey]; !seen {
				byBK[a.BusinessKey] = i
			} else if h[j].identity() != a.identity() {
				out = append(out, fmt.Sprintf("business key %q applied under two identities: %s on %s and %s on %s",
					a.BusinessKey, h[j].describe(j), keyText(h[j].Key), a.describe(i), keyText(a.Key)))
			}
		}
		if a.Key != "" {
			perKey[a.Key] = append(perKey[a.Key], i)
		}
	}
	keys := make([]string, 0, len(perKey))
	for k := range perKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, checkVersions(k, h, perKey[k], spec)...)
		if order, ok := spec.PublishOrder[k]; ok {
			out = append(out, checkPublishOrder(k, h, perKey[k], order)...)
		}
	}
	return out
}

func keyText(key string) string {
	if key == "" {
		return "no key"
	}
	return "key " + key
}

// checkVersions checks the versioned applies of one key: strictly
// increasing, and every version skipped accounted for.
func checkVersions(key string, h []Apply, idx []int, spec HistorySpec) []string {
	var out []string
	prev := -1
	for _, i := range idx {
		a := h[i]
		if !a.Versioned {
			continue
		}
		switch {
		case spec.FirstVersion != nil && a.Version < *spec.FirstVersion:
			out = append(out, fmt.Sprintf("key %s: %s is below the consumer's FirstVersion %d", key, a.describe(i), *spec.FirstVersion))
		case prev >= 0 && a.Version <= h[prev].Version:
			out = append(out, fmt.Sprintf("key %s: %s after %s: versions must strictly increase", key, a.describe(i), h[prev].describe(prev)))
		case prev >= 0:
			if miss := spec.Accounted.uncovered(key, h[prev].Version+1, a.Version-1); len(miss) > 0 {
				out = append(out, fmt.Sprintf("key %s: %s never applied between %s and %s, and the database accounts for it by no gap, skip, dead letter or stale, expired or semantic_duplicate outcome",
					key, spansText(miss), h[prev].describe(prev), a.describe(i)))
			}
		case spec.FirstVersion != nil:
			if miss := spec.Accounted.uncovered(key, *spec.FirstVersion, a.Version-1); len(miss) > 0 {
				out = append(out, fmt.Sprintf("key %s: %s never applied before %s, the key's first (FirstVersion %d), and the database accounts for it by no gap, skip, dead letter or stale, expired or semantic_duplicate outcome",
					key, spansText(miss), a.describe(i), *spec.FirstVersion))
			}
		}
		if prev < 0 || a.Version > h[prev].Version {
			prev = i
		}
	}
	return out
}

// checkPublishOrder checks that each apply of key follows the one before it
// in the producer's publish order.
func checkPublishOrder(key string, h []Apply, idx []int, order []string) []string {
	pos := make(map[string]int, len(order))
	for i, id := range order {
		if _, dup := pos[id]; !dup {
			pos[id] = i
		}
	}
	var out []string
	prev := -1
	for _, i := range idx {
		p, ok := pos[h[i].identity()]
		if !ok {
			out = append(out, fmt.Sprintf("key %s: %s was never published under this key", key, h[i].describe(i)))
			continue
		}
		if prev >= 0 && p < pos[h[prev].identity()] {
			out = append(out, fmt.Sprintf("key %s: %s (published %s) after %s (published %s), against the order its producer published them in",
				key, h[i].describe(i), ordinal(p+1), h[prev].describe(prev), ordinal(pos[h[prev].identity()]+1)))
		}
		prev = i
	}
	return out
}

func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// span is an inclusive range of versions.
type span struct{ from, to int64 }

func spansText(ss []span) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		if s.from == s.to {
			parts[i] = fmt.Sprintf("v%d", s.from)
		} else {
			parts[i] = fmt.Sprintf("v%d-v%d", s.from, s.to)
		}
	}
	word := "version"
	if len(ss) > 1 || ss[0].from != ss[0].to {
		word = "versions"
	}
	return word + " " + strings.Join(parts, ", ")
}
