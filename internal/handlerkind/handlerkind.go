// Package handlerkind lets seqbox's own commands mark a consumer as driven
// by the built-in record handler, without a public knob that an
// application could set by mistake: only a consumer registered with the
// record kind may be driven by the CLI in-process (docs/design.md §9).
package handlerkind

// Set marks consumer (a *seqbox.Consumer) with kind before its first
// delivery. Package seqbox installs it at init.
var Set func(consumer any, kind string)
