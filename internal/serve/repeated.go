package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// repeatedMember returns the first member name repeated within one JSON
// object of body, at any depth, or "" when there is none (or body is not
// JSON, which the decoder then reports). A request body with a repeated
// member has more than one meaning, as an event's has (docs/design.md
// §3): the admin and agent APIs refuse it rather than take the last one,
// which made `{"by":"a","by":"b"}` an action recorded as b's.
func repeatedMember(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		seen   map[string]bool
		key    bool // the next token of an object is a member name
	}
	var stack []*frame
	for {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := t.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
				continue
			}
			name, _ := t.(string)
			if top.seen[name] {
				return name
			}
			top.seen[name] = true
			top.key = false
			continue
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, seen: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: an object around it expects a name next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
		if len(stack) == 0 {
			return ""
		}
	}
}

// repeatedProblem is the 400 of a body whose member name is repeated.
func repeatedProblem(name string) Problem {
	return Problem{Type: ProblemBadRequest, Status: http.StatusBadRequest, Field: name,
		Detail: strconv.Quote(name) + " is given twice in the body: a member given twice has no one meaning"}
}
