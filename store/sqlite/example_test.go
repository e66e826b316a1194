package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seqbox/seqbox/store"
	"github.com/seqbox/seqbox/store/sqlite"
)

// The application's own database: seqbox creates its tables next to the
// application's, which it leaves as they are, so that the handler's writes
// and the inbox commit in one transaction.
func Example_adopt() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "seqbox-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "crm.db")

	// The application's database, with its own table.
	app, _ := sql.Open("sqlite", path)
	app.Exec(`CREATE TABLE crm_tasks (id INTEGER PRIMARY KEY, title TEXT NOT NULL)`)
	app.Exec(`INSERT INTO crm_tasks (title) VALUES ('call Acme')`)
	app.Close()

	// The library adopts it (sqlite.Open is store.Adopt).
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		panic(err)
	}
	var seqboxTables int
	st.DB().QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'seqbox_%'`).Scan(&seqboxTables)
	var title string
	st.DB().QueryRow(`SELECT title FROM crm_tasks`).Scan(&title)
	fmt.Println("seqbox tables created:", seqboxTables > 0)
	fmt.Println("application's task:", title)
	st.Close()

	// The CLI's creating commands (store.Exclusive) refuse it, untouched.
	_, err = sqlite.OpenWith(ctx, path, sqlite.Options{Access: store.Exclusive})
	fmt.Println(errors.Is(err, store.ErrForeignDatabase))
	// Output:
	// seqbox tables created: true
	// application's task: call Acme
	// true
}
