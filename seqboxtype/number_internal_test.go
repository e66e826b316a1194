package seqboxtype

import (
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// numberSeeds are literals on both sides of the exactness rule.
var numberSeeds = []string{
	"0", "-0", "0.0", "0e5", "25", "25.0", "2.5e1", "250E-1", "0.1", "1e-1", "0.10000000000000001",
	"0.1000000000000000055511151231257827", "1e300", "1e-400", "4.9e-324", "5e-324", "9007199254740992",
	"9007199254740993", "12345678901234567891", "1.00000000000000000001", "1.7976931348623157e308",
	"123456789012345680000", "333333333.33333329", "-9.007199254740993e15", "100e-2", "1E+21", "0.000001",
	"1e-7", "123456789012345678", "1234567890123456", "12345678901234567",
}

// hashedNumber's verdict agrees with math/big: a literal is accepted
// exactly when its rational value equals that of the shortest decimal of
// its double (for exponents small enough for big.Rat to build).
func FuzzHashedNumberAgreesWithBigRat(f *testing.F) {
	for _, s := range numberSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if !validNumber(lit) {
			return
		}
		canon, ok, outOfRange := hashedNumber([]byte(lit))
		fl, err := strconv.ParseFloat(lit, 64)
		if outOfRange != (err != nil) {
			t.Fatalf("%s: outOfRange %v, ParseFloat error %v", lit, outOfRange, err)
		}
		if outOfRange {
			return
		}
		if want := strconv.FormatFloat(fl, 'g', -1, 64); canon != want {
			t.Fatalf("%s: canonical %s, want %s", lit, canon, want)
		}
		if exponentOf(lit) > 2000 || exponentOf(lit) < -2000 {
			return // big.Rat would build 10^exponent
		}
		a, okA := new(big.Rat).SetString(lit)
		b, okB := new(big.Rat).SetString(canon)
		if !okA || !okB {
			t.Fatalf("big.Rat cannot read %s or %s", lit, canon)
		}
		if same := a.Cmp(b) == 0; same != ok {
			t.Fatalf("%s: accepted %v, but big.Rat says %s == %s is %v", lit, ok, lit, canon, same)
		}
	})
}

// TestHashedNumberSeeds runs the seeds through the same judgement with
// their expected verdicts spelled out.
func TestHashedNumberSeeds(t *testing.T) {
	refused := map[string]bool{
		"0.10000000000000001": true, "0.1000000000000000055511151231257827": true, "1e-400": true, "4.9e-324": true,
		"9007199254740993": true, "12345678901234567891": true, "1.00000000000000000001": true, "333333333.33333329": true,
		"-9.007199254740993e15": true, "123456789012345678": true, "12345678901234567": true,
	}
	for _, lit := range numberSeeds {
		_, ok, _ := hashedNumber([]byte(lit))
		if ok == refused[lit] {
			t.Errorf("%s: accepted %v, want %v", lit, ok, !refused[lit])
		}
	}
}

// validNumber is the RFC 8259 number grammar, by way of the scanner.
func validNumber(lit string) bool {
	s := envScanner{b: []byte(lit)}
	if lit == "" || !(lit[0] == '-' || '0' <= lit[0] && lit[0] <= '9') {
		return false
	}
	// Only the grammar: a refusal for range or exactness is not errSyntax.
	return s.number() != errSyntax && s.i == len(lit)
}

// exponentOf is the literal's exponent, saturated (0 when it has none).
func exponentOf(lit string) int {
	k := strings.IndexAny(lit, "eE")
	if k < 0 {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimPrefix(lit[k+1:], "+"))
	if err != nil {
		return 1 << 30
	}
	return n
}
