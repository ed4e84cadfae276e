package apiserver

import (
	"bytes"
	"strconv"

	"github.com/minictl/minictl/api"
)

// stampStored returns data, a value as encodeForStorage wrote it, with
// metadata.resourceVersion set to rv, in data's own encoding (protobuf or
// JSON): the bytes the object carrying that resourceVersion encodes to,
// spliced instead of decoded and encoded again. It reports false when
// data does not have the shape expected.
func stampStored(data []byte, rv int64) ([]byte, bool) {
	if storedProtobuf(data) {
		return api.StampProtobufResourceVersion(data, rv)
	}
	return withResourceVersion(data, rv)
}

// stampedProtobuf is stampStored of data when data is an object in
// protobuf (a value read from etcd, or a cached object's protobuf): the
// protobuf the object carrying resourceVersion rv encodes to, without
// encoding it again. nil when data is not protobuf or cannot be stamped.
func stampedProtobuf(data []byte, rv int64) []byte {
	if !storedProtobuf(data) {
		return nil
	}
	pb, ok := api.StampProtobufResourceVersion(data, rv)
	if !ok {
		return nil
	}
	return pb
}

// withResourceVersion returns data, an object's JSON as encodeForStorage
// writes a custom object (encoding/json's compact output, without a
// resourceVersion; a data dir from before protobuf holds every kind so), with
// metadata.resourceVersion set to rv: byte for byte what json.Marshal
// writes for the object carrying that resourceVersion, without decoding
// and encoding it again. It reports false when data does not have that
// shape (no metadata object, or one that has a resourceVersion already);
// the caller then encodes the object instead.
func withResourceVersion(data []byte, rv int64) ([]byte, bool) {
	meta, ok := topLevelValue(data, "metadata")
	if !ok || meta >= len(data) || data[meta] != '{' {
		return nil, false
	}
	// ObjectMeta's fields in their encoding order: resourceVersion goes
	// before the first of these that is present, or last.
	at := -1
	i := meta + 1
	for at < 0 {
		if i >= len(data) {
			return nil, false
		}
		if data[i] == '}' {
			at = i
			break
		}
		if data[i] == ',' {
			i++
		}
		key, end, ok := readKey(data, i)
		if !ok {
			return nil, false
		}
		switch string(key) {
		case "resourceVersion":
			return nil, false
		case "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
			"labels", "annotations", "ownerReferences", "finalizers", "clusterName", "managedFields":
			at = i
		default:
			if i, ok = skipValue(data, end); !ok {
				return nil, false
			}
		}
	}
	field := make([]byte, 0, 48)
	if data[at] == '}' && data[at-1] != '{' {
		field = append(field, ',')
	}
	field = append(field, `"resourceVersion":"`...)
	field = strconv.AppendInt(field, rv, 10)
	field = append(field, '"')
	if data[at] != '}' {
		field = append(field, ',')
	}
	out := make([]byte, 0, len(data)+len(field))
	out = append(out, data[:at]...)
	out = append(out, field...)
	out = append(out, data[at:]...)
	return out, true
}

// restampResourceVersion returns raw, an object's JSON as the watch cache
// holds it (with metadata.resourceVersion "from"), with the
// resourceVersion "to" instead.
func restampResourceVersion(raw []byte, from, to int64) ([]byte, bool) {
	old := strconv.AppendInt([]byte(`"resourceVersion":"`), from, 10)
	old = append(old, '"')
	// In compact encoding/json output the first occurrence is metadata's:
	// metadata comes before spec and status, resourceVersion before
	// labels and annotations, and a string value holding those bytes
	// would have its quotes escaped.
	i := bytes.Index(raw, old)
	if i < 0 {
		return nil, false
	}
	repl := strconv.AppendInt([]byte(`"resourceVersion":"`), to, 10)
	repl = append(repl, '"')
	out := make([]byte, 0, len(raw)-len(old)+len(repl))
	out = append(out, raw[:i]...)
	out = append(out, repl...)
	out = append(out, raw[i+len(old):]...)
	return out, true
}

// topLevelValue returns the index where the value of key starts in the
// compact JSON object data.
func topLevelValue(data []byte, key string) (int, bool) {
	if len(data) < 2 || data[0] != '{' {
		return 0, false
	}
	i := 1
	for i < len(data) && data[i] != '}' {
		if data[i] == ',' {
			i++
		}
		k, end, ok := readKey(data, i)
		if !ok {
			return 0, false
		}
		if string(k) == key {
			return end, true
		}
		if i, ok = skipValue(data, end); !ok {
			return 0, false
		}
	}
	return 0, false
}

// readKey reads `"key":` at i and returns the key (a slice of data) and
// the index of the value after the colon. Keys with escapes are not
// expected and refused.
func readKey(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	j := bytes.IndexByte(data[i+1:], '"')
	if j < 0 {
		return nil, 0, false
	}
	key := data[i+1 : i+1+j]
	end := i + 1 + j + 1
	if bytes.IndexByte(key, '\\') >= 0 || end >= len(data) || data[end] != ':' {
		return nil, 0, false
	}
	return key, end + 1, true
}

// skipValue returns the index just after the compact JSON value at i.
func skipValue(data []byte, i int) (int, bool) {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(data) {
				return 0, false
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(data) && (data[i] == ',' || data[i] == '}' || data[i] == ']') {
			return i, true
		}
	}
	return 0, false
}
