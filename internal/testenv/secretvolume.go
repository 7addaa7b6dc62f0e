package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SecretVolume mimics how the kubelet updates a Secret volume (AtomicWriter): the file is a
// symlink through ..data to a timestamped directory, and an update writes a new directory and
// renames a new ..data symlink over the old one.
// T is the test, Dir the volume's directory (it must exist).
type SecretVolume struct {
	T   testing.TB
	Dir string
	n   int
}

// Write puts token in the volume's file token, as the kubelet updates a Secret.
func (v *SecretVolume) Write(token string) {
	v.n++
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.Dir, ts), 0o755); err != nil {
		v.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.Dir, ts, "token"), []byte(token), 0o600); err != nil {
		v.T.Fatal(err)
	}
	tmp := filepath.Join(v.Dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.T.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.Dir, "..data")); err != nil {
		v.T.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(v.Dir, "token")); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(v.Dir, "token")); err != nil {
			v.T.Fatal(err)
		}
	}
}
