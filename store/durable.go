package store

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// durable does the steps whose order on disk makes the store durable: a
// sync of a file's data, of a directory's names, a rename into place, a
// removal. Its zero value does each directly. Tests in package store set
// step (Options.durable) to see each step, in order, before it is done,
// and to fail one: a step that returns an error is not done.
type durable struct {
	step func(op, path string) error
}

// The ops a step sees. A rename's path is "OLD -> NEW".
const (
	opSync    = "sync"     // a file's data (fdatasync or fsync)
	opSyncDir = "sync-dir" // a directory's names
	opRename  = "rename"
	opRemove  = "remove"
)

func (d durable) observe(op, path string) error {
	if d.step == nil {
		return nil
	}
	return d.step(op, path)
}

// fdatasync is fdatasync(f), observed as a sync of path (f's name now:
// a file renamed since it was opened keeps its old os.File.Name).
func (d durable) fdatasync(f *os.File, path string) error {
	if err := d.observe(opSync, path); err != nil {
		return err
	}
	return fdatasync(f)
}

// fsync is f.Sync(), observed as a sync of path.
func (d durable) fsync(f *os.File, path string) error {
	if err := d.observe(opSync, path); err != nil {
		return err
	}
	return f.Sync()
}

// syncBolt is b.Sync() of the bbolt file at path, observed.
func (d durable) syncBolt(b *bolt.DB, path string) error {
	if err := d.observe(opSync, path); err != nil {
		return err
	}
	return b.Sync()
}

// syncDir is syncDir(dir), observed.
func (d durable) syncDir(dir string) error {
	if err := d.observe(opSyncDir, dir); err != nil {
		return err
	}
	return syncDir(dir)
}

// rename is os.Rename, observed.
func (d durable) rename(oldPath, newPath string) error {
	if err := d.observe(opRename, oldPath+" -> "+newPath); err != nil {
		return err
	}
	return os.Rename(oldPath, newPath)
}

// remove is os.Remove, observed.
func (d durable) remove(p string) error {
	if err := d.observe(opRemove, p); err != nil {
		return err
	}
	return os.Remove(p)
}
