package main

import (
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox/internal/demo"
	"github.com/seqbox/seqbox/store/sqlite"
	"github.com/spf13/cobra"
)

func demoCmd() *cobra.Command {
	var db string
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the inbox lab: 2 messages, each delivered twice after a crash before ACK",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				tmp, err := os.MkdirTemp("", "seqbox-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				db = filepath.Join(tmp, sqlite.DefaultPath)
			}
			_, err := demo.Run(cmd.Context(), db, cmd.OutOrStdout())
			return err
		},
	}
	c.Flags().StringVar(&db, "db", "", "fresh SQLite file or postgres:// URL (default: a temporary SQLite file)")
	return c
}
