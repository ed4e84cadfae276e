package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kubernetes' protobuf encoding, as kube-apiserver serves it to clients
// that ask for it (client-go's typed clients, kube-controller-manager and
// kube-scheduler do): the same objects as JSON, several times cheaper to
// decode. Every k8s.io/api type has generated protobuf code.
//
//   - An object or a list is the magic "k8s\x00" and then a
//     runtime.Unknown: its apiVersion and kind, and the object's own
//     protobuf bytes (Raw).
//   - A list's own bytes are its ListMeta (field 1) and each item
//     (field 2, repeated), for every <Kind>List.
//   - A watch (Content-Type ProtobufWatchMediaType) is a series of
//     frames: a 4-byte big-endian length, then a metav1.WatchEvent
//     (type, and the object as above in a RawExtension), with no magic.
const (
	ProtobufMediaType      = "application/vnd.kubernetes.protobuf"
	ProtobufWatchMediaType = ProtobufMediaType + ";stream=watch"
)

var protobufMagic = []byte("k8s\x00")

// MaxProtobufFrame bounds one watch frame a client accepts: far above the
// largest object (etcd's 1.5 MiB value limit) and the server's 3 MiB body
// limit, far below what a corrupt length could ask for.
const MaxProtobufFrame = 64 << 20

// protoMessage is what k8s.io/api's generated protobuf code implements.
type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// HasProtobuf reports whether obj's type can be encoded as protobuf.
func HasProtobuf(obj runtime.Object) bool {
	_, ok := obj.(protoMessage)
	return ok
}

// ProtobufMessage is obj's own protobuf bytes, without the envelope.
func ProtobufMessage(obj runtime.Object) ([]byte, error) {
	m, ok := obj.(protoMessage)
	if !ok {
		return nil, fmt.Errorf("%T has no protobuf encoding", obj)
	}
	return m.Marshal()
}

// ProtobufEnvelope wraps msg, the protobuf bytes of an object of apiVersion
// and kind, as Kubernetes sends an object.
func ProtobufEnvelope(apiVersion, kind string, msg []byte) ([]byte, error) {
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: msg}
	b := make([]byte, len(protobufMagic)+unk.Size())
	copy(b, protobufMagic)
	if _, err := unk.MarshalToSizedBuffer(b[len(protobufMagic):]); err != nil {
		return nil, err
	}
	return b, nil
}

// MarshalProtobuf encodes obj, whose TypeMeta names its kind, with the
// envelope.
func MarshalProtobuf(obj runtime.Object) ([]byte, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	return MarshalProtobufAs(gvk.GroupVersion().String(), gvk.Kind, obj)
}

// sizedMessage is the part of k8s.io/api's generated protobuf code that
// encodes into a buffer the caller made.
type sizedMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// MarshalProtobufAs encodes obj with the envelope naming apiVersion and
// kind: the bytes ProtobufEnvelope makes of obj's own, written into one
// buffer instead of encoding the object and then copying it in.
func MarshalProtobufAs(apiVersion, kind string, obj runtime.Object) ([]byte, error) {
	m, ok := obj.(sizedMessage)
	if !ok {
		msg, err := ProtobufMessage(obj)
		if err != nil {
			return nil, err
		}
		return ProtobufEnvelope(apiVersion, kind, msg)
	}
	// runtime.Unknown{TypeMeta: {apiVersion, kind}, Raw: the object,
	// ContentEncoding: "", ContentType: ""}, its fields in order; the
	// generated code writes the two empty strings too.
	n := m.Size()
	typeMeta := protowire.SizeTag(1) + protowire.SizeBytes(len(apiVersion)) + protowire.SizeTag(2) + protowire.SizeBytes(len(kind))
	size := len(protobufMagic) + protowire.SizeTag(1) + protowire.SizeBytes(typeMeta) +
		protowire.SizeTag(2) + protowire.SizeBytes(n) + 2*(protowire.SizeTag(3)+protowire.SizeBytes(0))
	b := make([]byte, 0, size)
	b = append(b, protobufMagic...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(typeMeta))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, apiVersion)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, kind)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	start := len(b)
	b = b[:start+n]
	if _, err := m.MarshalToSizedBuffer(b[start:]); err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "")
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendString(b, ""), nil
}

// ProtobufList is the list of kind listKind around items, each an
// object's own protobuf bytes.
func ProtobufList(apiVersion, listKind string, meta *metav1.ListMeta, items [][]byte) ([]byte, error) {
	lm, err := meta.Marshal()
	if err != nil {
		return nil, err
	}
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(lm))
	for _, it := range items {
		size += protowire.SizeTag(2) + protowire.SizeBytes(len(it))
	}
	b := make([]byte, 0, size)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, lm)
	for _, it := range items {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, it)
	}
	return ProtobufEnvelope(apiVersion, listKind, b)
}

// UnmarshalProtobuf decodes msg, an object's own protobuf bytes, into obj.
func UnmarshalProtobuf(msg []byte, obj runtime.Object) error {
	m, ok := obj.(protoMessage)
	if !ok {
		return fmt.Errorf("%T has no protobuf encoding", obj)
	}
	return m.Unmarshal(msg)
}

// ProtobufListItems reads a list's own bytes: its ListMeta, and each
// item's bytes (slices of msg) in order.
func ProtobufListItems(msg []byte) (metav1.ListMeta, [][]byte, error) {
	var meta metav1.ListMeta
	var items [][]byte
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return meta, nil, fmt.Errorf("protobuf list: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			// A field this list does not have: skip it, as protobuf does.
			if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
				return meta, nil, fmt.Errorf("protobuf list: %w", protowire.ParseError(n))
			}
			msg = msg[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return meta, nil, fmt.Errorf("protobuf list: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		if num == 1 {
			if err := meta.Unmarshal(v); err != nil {
				return meta, nil, fmt.Errorf("protobuf list metadata: %w", err)
			}
			continue
		}
		items = append(items, v)
	}
	return meta, items, nil
}

// ProtobufWatchFrame is one watch event of type typ, whose object is env
// (an object with its envelope), as a length-prefixed frame.
func ProtobufWatchFrame(typ string, env []byte) []byte {
	head := AppendProtobufWatchFrameHead(make([]byte, 0, 32+len(env)), typ, len(env))
	return append(head, env...)
}

// AppendProtobufWatchFrameHead appends to b the start of the frame of a
// watch event of type typ whose object, with its envelope, is size bytes
// long: the frame is that start followed by the object's bytes. A server
// writing one object to many watchers writes each its own start and the
// same object bytes, and copies nothing.
func AppendProtobufWatchFrameHead(b []byte, typ string, size int) []byte {
	// metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: env}}
	ext := protowire.SizeTag(1) + protowire.SizeBytes(size)
	frame := protowire.SizeTag(1) + protowire.SizeBytes(len(typ)) + protowire.SizeTag(2) + protowire.SizeBytes(ext)
	b = binary.BigEndian.AppendUint32(b, uint32(frame))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, typ)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(ext))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(size))
}

// ReadProtobufWatchFrame reads the next frame from r into buf (grown as
// needed) and returns its event type and its object, with its envelope, as
// a slice of the returned buffer: valid until the next read into it.
// io.EOF means the stream ended between frames; a stream cut inside one is
// io.ErrUnexpectedEOF.
func ReadProtobufWatchFrame(r io.Reader, buf []byte) (typ string, env, next []byte, err error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", nil, buf, err
	}
	size := binary.BigEndian.Uint32(head[:])
	if size > MaxProtobufFrame {
		return "", nil, buf, fmt.Errorf("watch frame of %d bytes is larger than %d", size, MaxProtobufFrame)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, buf, err
	}
	// metav1.WatchEvent{type = 1, object = 2: RawExtension{raw = 1}}
	typeField, objField, err := twoFields(buf, 1, 2)
	if err != nil {
		return "", nil, buf, fmt.Errorf("watch frame: %w", err)
	}
	env, _, err = twoFields(objField, 1, 0)
	if err != nil {
		return "", nil, buf, fmt.Errorf("watch frame object: %w", err)
	}
	return string(typeField), env, buf, nil
}

// IsProtobufObject reports whether data starts as an object in Kubernetes'
// protobuf envelope does (rather than as JSON).
func IsProtobufObject(data []byte) bool { return bytes.HasPrefix(data, protobufMagic) }

// ProtobufObject reads an object's envelope without copying: the
// apiVersion and kind it names, and the object's own bytes, a slice of env.
func ProtobufObject(env []byte) (apiVersion, kind string, msg []byte, err error) {
	rest, ok := bytes.CutPrefix(env, protobufMagic)
	if !ok {
		return "", "", nil, errors.New("protobuf object without the k8s\\x00 prefix")
	}
	// runtime.Unknown{typeMeta = 1: {apiVersion = 1, kind = 2}, raw = 2}
	tm, msg, err := twoFields(rest, 1, 2)
	if err != nil {
		return "", "", nil, fmt.Errorf("protobuf envelope: %w", err)
	}
	av, k, err := twoFields(tm, 1, 2)
	if err != nil {
		return "", "", nil, fmt.Errorf("protobuf envelope type: %w", err)
	}
	return string(av), string(k), msg, nil
}

// twoFields returns the last values of the length-delimited fields a and b
// (b 0: none) of the message m, as slices of m, skipping every other field.
func twoFields(m []byte, a, b protowire.Number) (va, vb []byte, err error) {
	for len(m) > 0 {
		num, typ, n := protowire.ConsumeTag(m)
		if n < 0 {
			return nil, nil, protowire.ParseError(n)
		}
		m = m[n:]
		if typ == protowire.BytesType && (num == a || (b != 0 && num == b)) {
			v, n := protowire.ConsumeBytes(m)
			if n < 0 {
				return nil, nil, protowire.ParseError(n)
			}
			if num == a {
				va = v
			} else {
				vb = v
			}
			m = m[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, m); n < 0 {
			return nil, nil, protowire.ParseError(n)
		}
		m = m[n:]
	}
	return va, vb, nil
}

// StampProtobufResourceVersion returns env, an object's envelope as
// MarshalProtobufAs writes it, with metadata.resourceVersion set to rv:
// byte for byte what MarshalProtobufAs writes for the object carrying
// that resourceVersion, without decoding and encoding it again. Every
// Kubernetes object's own bytes start with its ObjectMeta (field 1),
// whose resourceVersion is field 6; the generated code writes a string
// field even when it is empty, so a stored object, which has none, still
// has its place. It reports false when env does not have that shape.
func StampProtobufResourceVersion(env []byte, rv int64) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(env, protobufMagic)
	if !ok {
		return nil, false
	}
	// The envelope: runtime.Unknown{typeMeta = 1, raw = 2, ...}.
	rawAt, raw, ok := lengthDelimited(rest, 2)
	if !ok {
		return nil, false
	}
	metaAt, meta, ok := lengthDelimited(raw, 1)
	if !ok || metaAt.tag != 0 {
		return nil, false // the object's first field is not its metadata
	}
	// Where field 6 is, or where it goes: before the first higher field.
	at, end := len(meta), len(meta)
	for i := 0; i < len(meta); {
		num, typ, n := protowire.ConsumeTag(meta[i:])
		if n < 0 {
			return nil, false
		}
		if num >= 6 {
			at, end = i, i
			if num == 6 {
				if typ != protowire.BytesType {
					return nil, false
				}
				m := protowire.ConsumeFieldValue(num, typ, meta[i+n:])
				if m < 0 {
					return nil, false
				}
				end = i + n + m
			}
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, meta[i+n:])
		if m < 0 {
			return nil, false
		}
		i += n + m
	}
	var field [32]byte
	digits := strconv.AppendInt(field[:0:0], rv, 10)
	f := protowire.AppendTag(field[:0], 6, protowire.BytesType)
	f = protowire.AppendBytes(f, digits)
	metaLen := len(meta) - (end - at) + len(f)
	rawLen := len(raw) - len(meta) - (metaAt.value - metaAt.tag) + protowire.SizeTag(1) + protowire.SizeBytes(metaLen)
	out := make([]byte, 0, len(env)-len(raw)-(rawAt.value-rawAt.tag)+protowire.SizeTag(2)+protowire.SizeBytes(rawLen))
	out = append(out, env[:len(protobufMagic)+rawAt.tag]...)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(rawLen))
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(metaLen))
	out = append(out, meta[:at]...)
	out = append(out, f...)
	out = append(out, meta[end:]...)
	out = append(out, raw[metaAt.value+len(meta):]...)
	out = append(out, rest[rawAt.value+len(raw):]...)
	return out, true
}

// fieldAt is where a length-delimited field starts in its message: its
// tag, and its value after the length.
type fieldAt struct{ tag, value int }

// lengthDelimited finds the first length-delimited field num of the
// message m: where it is, and its value (a slice of m).
func lengthDelimited(m []byte, num protowire.Number) (fieldAt, []byte, bool) {
	for i := 0; i < len(m); {
		got, typ, n := protowire.ConsumeTag(m[i:])
		if n < 0 {
			return fieldAt{}, nil, false
		}
		if got == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(m[i+n:])
			if l < 0 {
				return fieldAt{}, nil, false
			}
			return fieldAt{tag: i, value: i + n + l - len(v)}, v, true
		}
		l := protowire.ConsumeFieldValue(got, typ, m[i+n:])
		if l < 0 {
			return fieldAt{}, nil, false
		}
		i += n + l
	}
	return fieldAt{}, nil, false
}
