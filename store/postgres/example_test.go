package postgres_test

import (
	"context"
	"fmt"
	"os"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/postgres"
)

// The application's own database: seqbox keeps its tables in schema
// seqbox, and the application's unqualified SQL still reaches its own
// schema through the store's pool and in the handler's transaction. (This
// example needs a server, so it is compiled but not run by go test.)
func Example_adopt() {
	ctx := context.Background()
	st, err := postgres.Open(ctx, os.Getenv("DATABASE_URL")) // e.g. postgres://app@db/crm
	if err != nil {
		panic(err)
	}
	defer st.Close()
	// Lands in public (or the first schema of the application's search_path).
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS crm_tasks (id SERIAL PRIMARY KEY, title TEXT)`); err != nil {
		panic(err)
	}
	var inbox string
	st.DB().QueryRowContext(ctx, `SELECT to_regclass('seqbox_inbox')::text`).Scan(&inbox)
	fmt.Println(inbox) // seqbox.seqbox_inbox

	// Inspection without writing anything, seqbox's tables in another schema.
	ro, err := postgres.OpenWith(ctx, os.Getenv("DATABASE_URL"), postgres.Options{Access: store.ReadOnly, Schema: "seqbox"})
	if err != nil {
		panic(err)
	}
	defer ro.Close()
}
