package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/thinbot/thinbot/store"
)

func ExampleDB_Append() {
	dir, _ := os.MkdirTemp("", "store-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	evs, err := db.Append(ctx, store.Event{
		Session: "mm:town-square:abc", Type: "user_message", Actor: "user:alice",
		Payload: json.RawMessage(`{"text": "why is disk full on db1?"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(evs[0].Seq, evs[0].Prev == store.ZeroHash, string(evs[0].Payload))
	rep, _ := db.Verify(ctx, nil)
	fmt.Println(rep.OK, rep.Events, rep.LastHash == evs[0].Hash)
	// Output:
	// 1 true {"text":"why is disk full on db1?"}
	// true 1 true
}
