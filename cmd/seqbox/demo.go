package main

import (
	"os"

	"github.com/seqbox/seqbox/internal/demo"
	"github.com/spf13/cobra"
)

func demoCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the inbox lab: 2 messages, each delivered twice after a crash before ACK",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d := dir
			if d == "" {
				tmp, err := os.MkdirTemp("", "seqbox-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				d = tmp
			}
			_, err := demo.Run(cmd.Context(), d, cmd.OutOrStdout())
			return err
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory for seqbox.db (default: a temporary one)")
	return c
}
