package main

import "github.com/spf13/cobra"

func dlqCmd() *cobra.Command  { return &cobra.Command{Use: "dlq", Short: "Inspect and resolve dead letters"} }
func keysCmd() *cobra.Command { return &cobra.Command{Use: "keys", Short: "Inspect ordered keys"} }
