// Package jsonkind names a JSON value's type for error messages.
package jsonkind

// Of names the JSON type of a value by its first byte: "a string", "an
// object", "an array", "a boolean", "null" or "a number".
func Of(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
