package testclock_test

import (
	"fmt"
	"time"

	"github.com/seqbox/seqbox/internal/testclock"
)

func Example() {
	c := testclock.At(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	c.Advance(90 * time.Second)
	fmt.Println(c.Now().Format(time.TimeOnly))
	// Output: 10:01:30
}
