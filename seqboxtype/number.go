package seqboxtype

import (
	"bytes"
	"strconv"
)

// This file is the rule for JSON numbers in an envelope (docs/design.md
// §3): the payload hash is SHA-256 of the RFC 8785 form, which reads a
// number as an IEEE-754 double and writes that double's shortest
// round-trip decimal (ECMAScript's Number.prototype.toString). Spellings
// of one value (25, 25.0, 2.5e1; 0.1 and 1e-1) hash the same, as they
// should. But a literal that is not exactly the value RFC 8785 writes for
// its double shares the hash with every other literal rounding to that
// double: 12345678901234567891 and 12345678901234567890 hash alike, so a
// changed amount is a duplicate instead of a collision. Such a number has
// more than one meaning under the hash and is refused.

// maxExactDigits is the longest integer literal (without sign) that is
// always exact: every integer of at most 15 digits is a double, and
// RFC 8785 writes it with the same digits.
const maxExactDigits = 15

// hashedNumber judges a JSON number literal the scanner has accepted by
// grammar. It returns the text RFC 8785 writes for it: the shortest
// decimal that reads back as the same double (strconv.FormatFloat(f,
// 'g', -1, 64), which is the same value as RFC 8785's text). ok is
// false when the literal cannot be hashed faithfully, and then
// outOfRange says why:
//
//   - outOfRange: the literal is beyond the largest double (1e400), and
//     RFC 8785 has no text for it;
//   - otherwise the literal's exact decimal value differs from the exact
//     value of that shortest decimal: 9007199254740993 (hashed as
//     9007199254740992), 1.00000000000000000001 (as 1), 1e-400 (as 0),
//     0.1000000000000000055511151231257827 (as 0.1). Two different
//     numbers a producer could mean would share a hash.
//
// So 25, 25.0, 2.5e1, 0.1, 1e300 and 9007199254740992 are accepted: each
// is exactly the value RFC 8785 writes, whatever its spelling. (0.1 is
// not exactly its double, 0.1000000000000000055511151231257827; the rule
// compares with the decimal RFC 8785 writes, "0.1", not with the double,
// because that decimal is the value the hash stands for.) The comparison
// is exact, as math/big's Rat would make it, but on the literals'
// significant digits and decimal exponents: two decimals are the same
// rational number exactly when those are equal, and a literal such as
// 1e-999999999 costs no more than its length.
func hashedNumber(lit []byte) (canonical string, ok, outOfRange bool) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return "", false, true
	}
	canonical = strconv.FormatFloat(f, 'g', -1, 64)
	return canonical, sameDecimal(lit, []byte(canonical)), false
}

// sameDecimal reports whether two JSON number literals (or Go 'g'
// formats of a float64) denote the same rational number.
func sameDecimal(a, b []byte) bool {
	na, nb := normalDecimal(a), normalDecimal(b)
	return na.zero() && nb.zero() || na == nb
}

// decimal is a number as sign × digits × 10^exp, digits with neither
// leading nor trailing zeros; zero has no digits.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

func (d decimal) zero() bool { return d.digits == "" }

// maxExponent bounds the exponent normalDecimal keeps. A literal's
// exponent beyond it puts a nonzero value far outside a double's range
// (a literal is at most MaxEventSize digits long), where it can equal no
// double's shortest text; saturating keeps the arithmetic in an int64.
const maxExponent = 1 << 40

// normalDecimal reads a number literal (sign, digits, an optional
// fraction, an optional exponent) as a decimal.
func normalDecimal(lit []byte) decimal {
	var d decimal
	if len(lit) > 0 && lit[0] == '-' {
		d.neg, lit = true, lit[1:]
	}
	mant, expText := lit, []byte(nil)
	if k := bytes.IndexAny(lit, "eE"); k >= 0 {
		mant, expText = lit[:k], lit[k+1:]
	}
	intPart, frac, _ := bytes.Cut(mant, []byte("."))
	var e int64
	expNeg := false
	if len(expText) > 0 && (expText[0] == '+' || expText[0] == '-') {
		expNeg, expText = expText[0] == '-', expText[1:]
	}
	for _, c := range expText {
		if e < maxExponent {
			e = e*10 + int64(c-'0')
		}
	}
	e = min(e, maxExponent)
	if expNeg {
		e = -e
	}
	digits := make([]byte, 0, len(intPart)+len(frac))
	digits = append(append(digits, intPart...), frac...)
	digits = bytes.TrimLeft(digits, "0")
	trimmed := bytes.TrimRight(digits, "0")
	d.exp = e - int64(len(frac)) + int64(len(digits)-len(trimmed))
	d.digits = string(trimmed)
	return d
}
