package speech

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Audio formats Sniff recognises.
const (
	FormatWAV  = "WAV"
	FormatWebM = "WebM"
	FormatOgg  = "Ogg"
	FormatMP4  = "MP4"
)

// Sniff names the container of b from its first bytes, or "" when it is not
// one of the recorders' formats (WAV, WebM/Matroska, Ogg, MP4/M4A).
func Sniff(b []byte) string {
	switch {
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return FormatWAV
	case len(b) >= 4 && bytes.Equal(b[:4], []byte{0x1A, 0x45, 0xDF, 0xA3}):
		return FormatWebM
	case len(b) >= 4 && string(b[:4]) == "OggS":
		return FormatOgg
	case len(b) >= 12 && string(b[4:8]) == "ftyp":
		return FormatMP4
	}
	return ""
}

// WAVInfo is what a WAV header says about its samples.
type WAVInfo struct {
	Format     uint16 // 1 = PCM, 3 = IEEE float, 0xFFFE = extensible
	Channels   uint16
	SampleRate uint32
	Bits       uint16
	DataBytes  uint32
}

// Duration is the length of the audio.
func (w WAVInfo) Duration() time.Duration {
	perSec := uint64(w.SampleRate) * uint64(w.Channels) * uint64(w.Bits/8)
	if perSec == 0 {
		return 0
	}
	return time.Duration(uint64(w.DataBytes) * uint64(time.Second) / perSec)
}

// Whisper reports whether whisper.cpp reads the file as it is: 16 kHz,
// 16-bit PCM, mono or stereo.
func (w WAVInfo) Whisper() bool {
	return (w.Format == 1 || w.Format == 0xFFFE) && w.SampleRate == 16000 && w.Bits == 16 && (w.Channels == 1 || w.Channels == 2)
}

// ParseWAV reads a RIFF/WAVE header: the fmt chunk and the data chunk's size
// (clamped to the bytes present, as a recorder killed mid-write leaves a
// header claiming more).
func ParseWAV(b []byte) (WAVInfo, error) {
	var w WAVInfo
	if Sniff(b) != FormatWAV {
		return w, errors.New("not a RIFF/WAVE file")
	}
	var haveFmt bool
	for off := 12; off+8 <= len(b); {
		id := string(b[off : off+4])
		size := binary.LittleEndian.Uint32(b[off+4 : off+8])
		body := off + 8
		switch id {
		case "fmt ":
			if size < 16 || body+16 > len(b) {
				return w, errors.New("the fmt chunk is truncated")
			}
			w.Format = binary.LittleEndian.Uint16(b[body:])
			w.Channels = binary.LittleEndian.Uint16(b[body+2:])
			w.SampleRate = binary.LittleEndian.Uint32(b[body+4:])
			w.Bits = binary.LittleEndian.Uint16(b[body+14:])
			haveFmt = true
		case "data":
			if !haveFmt {
				return w, errors.New("the data chunk comes before the fmt chunk")
			}
			w.DataBytes = uint32(min(uint64(size), uint64(len(b)-body)))
			if w.Channels == 0 || w.SampleRate == 0 || w.Bits == 0 {
				return w, fmt.Errorf("the fmt chunk says %d channels at %d Hz, %d-bit", w.Channels, w.SampleRate, w.Bits)
			}
			return w, nil
		}
		next := uint64(body) + uint64(size) + uint64(size&1)
		if next > uint64(len(b)) {
			break
		}
		off = int(next)
	}
	if !haveFmt {
		return w, errors.New("no fmt chunk")
	}
	return w, errors.New("no data chunk")
}

// WAV encodes 16-bit PCM samples as a WAV file (tests and previews).
func WAV(samples []int16, rate uint32, channels uint16) []byte {
	var b bytes.Buffer
	data := uint32(len(samples) * 2)
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, 36+data)
	b.WriteString("WAVEfmt ")
	binary.Write(&b, binary.LittleEndian, uint32(16))
	binary.Write(&b, binary.LittleEndian, uint16(1))
	binary.Write(&b, binary.LittleEndian, channels)
	binary.Write(&b, binary.LittleEndian, rate)
	binary.Write(&b, binary.LittleEndian, rate*uint32(channels)*2)
	binary.Write(&b, binary.LittleEndian, channels*2)
	binary.Write(&b, binary.LittleEndian, uint16(16))
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, data)
	binary.Write(&b, binary.LittleEndian, samples)
	return b.Bytes()
}
