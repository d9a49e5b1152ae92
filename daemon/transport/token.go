package transport

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vramscope/vramscope/daemon/store"
)

// The TCP token lives in a file only the daemon's user can read, by default
// <socket>.token. A daemon writes a fresh token at each start, but never over
// a file it did not write: a file that is there already must look like a
// token of its own (ownToken), else the daemon refuses to start.

const tokenBytes = 32

// WriteToken makes a fresh random token and writes it to path (mode 0600,
// created beside it and renamed into place, so a reader never sees half of it)
// under the daemon's rules (never over a file that is not a token of this
// user). The file's Remove removes it if it is still the one written.
// vramscope mcp --http guards its listener with it too.
func WriteToken(path string) (string, *OwnedFile, error) {
	if err := tokenPathFree(path); err != nil {
		return "", nil, err
	}
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	tok := hex.EncodeToString(b)
	dir := filepath.Dir(path)
	if err := socketDir(dir); err != nil {
		return "", nil, fmt.Errorf("token directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".token-*") // O_EXCL, mode 0600
	if err != nil {
		return "", nil, fmt.Errorf("writing token %s: %w", path, err)
	}
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, fmt.Errorf("writing token %s: %w", path, err)
	}
	o, err := own(path)
	return tok, o, err
}

// tokenPathFree says whether the daemon may write its token at path: nothing
// is there, or a token file a daemon of this user wrote.
func tokenPathFree(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if why := notOwnToken(path, fi); why != "" {
		return fmt.Errorf("token file %s exists and is not a vramscope token (%s); not overwriting it: remove it or pass --token-file", path, why)
	}
	return nil
}

// notOwnToken says why the file at path is not a token a daemon of this user
// wrote, or "" when it is one: a regular file of ours, mode 0600, holding
// 64 hex digits and a newline.
func notOwnToken(path string, fi fs.FileInfo) string {
	if !fi.Mode().IsRegular() {
		return store.FileKind(fi.Mode())
	}
	if uid := store.FileUID(fi); uid >= 0 && uid != os.Getuid() {
		return fmt.Sprintf("it belongs to uid %d", uid)
	}
	if fi.Mode().Perm() != 0o600 {
		return fmt.Sprintf("its mode is %v, not 0600", fi.Mode().Perm())
	}
	if fi.Size() != 2*tokenBytes+1 {
		return fmt.Sprintf("it holds %d bytes, not %d", fi.Size(), 2*tokenBytes+1)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if _, err := hex.DecodeString(string(b[:2*tokenBytes])); err != nil || b[2*tokenBytes] != '\n' {
		return "it does not hold a hex token"
	}
	return ""
}
