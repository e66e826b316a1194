package model_test

import (
	"fmt"

	"github.com/seqbox/seqbox/internal/model"
)

// A mutant that acknowledges before it commits is caught at once: the
// shortest counterexample is two steps.
func ExampleModel_Check() {
	m, err := model.New(model.SmallBounds(), model.AckBeforeCommit)
	if err != nil {
		panic(err)
	}
	r := m.Check(model.Options{})
	fmt.Println(r.Violation)
	for _, step := range r.Trace[:2] {
		fmt.Println(step)
	}
	// Output:
	// ACK only after COMMIT: a copy of k0/v1 was acknowledged with nothing committed for it
	//   1. worker 1 receives k0/v1 (copy 1)
	//   2. worker 1 acknowledges k0/v1 before committing anything
}
