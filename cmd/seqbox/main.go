// Command seqbox is the reliability layer in front of a message consumer's
// side effects: a transactional inbox, ordering per business object, and the
// operator tools around them. See `seqbox help`.
//
// It links no broker emulator: `seqbox chaos` over a broker transport runs
// against a running broker given with --broker; seqbox-lab runs them in
// process.
package main

import "github.com/seqbox/seqbox/internal/cli"

func main() { cli.Main(cli.Edition{Name: "seqbox"}) }
