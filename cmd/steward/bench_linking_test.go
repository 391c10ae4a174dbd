package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// The scheduler bench reports how the measured binary is linked, from its
// program headers.
func TestBinaryLinking(t *testing.T) {
	elf := func(types ...uint32) []byte {
		b := make([]byte, 64+56*len(types))
		copy(b, "\x7fELF\x02\x01")
		binary.LittleEndian.PutUint64(b[0x20:], 64)
		binary.LittleEndian.PutUint16(b[0x36:], 56)
		binary.LittleEndian.PutUint16(b[0x38:], uint16(len(types)))
		for i, typ := range types {
			binary.LittleEndian.PutUint32(b[64+56*i:], typ)
		}
		return b
	}
	truncated := elf(6, 3)[:64+56]
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"static: PHDR and LOAD only", elf(6, 1, 1), "static"},
		{"dynamic: an INTERP header", elf(6, 3, 1, 2), "dynamic"},
		{"not ELF", []byte("#!/bin/sh\necho hello\n" + string(make([]byte, 64))), ""},
		{"32-bit ELF", append([]byte("\x7fELF\x01\x01"), make([]byte, 64)...), ""},
		{"headers cut short", truncated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bin")
			if err := os.WriteFile(p, tc.file, 0o755); err != nil {
				t.Fatal(err)
			}
			if got := binaryLinking(p); got != tc.want {
				t.Errorf("binaryLinking = %q, want %q", got, tc.want)
			}
		})
	}
	if got := binaryLinking(filepath.Join(t.TempDir(), "missing")); got != "" {
		t.Errorf("missing file: %q, want empty", got)
	}
}
