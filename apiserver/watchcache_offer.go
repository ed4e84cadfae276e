package apiserver

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/minictl/minictl/api"
)

// offered is an object as a writer had it, and data, its stored bytes.
type offered struct {
	obj  api.Object
	data []byte

	// data stamped with a revision: spliced once, for the writer's answer
	// and the cache alike.
	stampMu sync.Mutex
	stampRV int64
	stamp   []byte
}

// stamped returns data with metadata.resourceVersion set to rev, in its
// encoding (see stampStored), stamping it only once for a given rev. The
// bytes are shared: nobody may change them.
func (o *offered) stamped(rev int64) ([]byte, bool) {
	o.stampMu.Lock()
	defer o.stampMu.Unlock()
	if o.stamp == nil || o.stampRV != rev {
		raw, ok := stampStored(o.data, rev)
		if !ok {
			return nil, false
		}
		o.stamp, o.stampRV = raw, rev
	}
	return o.stamp, true
}

// offer is told, before this server writes o.data under key, the object
// o.obj that data encodes. If etcd's watch then reports exactly that data
// under key, the cache takes what it needs from o (see takeOffered)
// instead of decoding the value and encoding it again: equal bytes are
// what makes the object the same. resourceStore.offers says which writes
// are offered. The caller
// hands o.obj over and never changes it afterwards; withdraw drops the
// offer, if it is still there, when the write fails. A later offer for the
// same key replaces an earlier one, whose event is then decoded as usual.
func (c *watchCache) offer(key string, o *offered) (withdraw func()) {
	if c.uncached {
		return func() {} // no event of the write is ever taken
	}
	c.offeredMu.Lock()
	c.offered[key] = o
	c.offeredMu.Unlock()
	return func() {
		c.offeredMu.Lock()
		if c.offered[key] == o {
			delete(c.offered, key)
		}
		c.offeredMu.Unlock()
	}
}

// dropOffered forgets what was offered for key, which was just deleted.
// An offer is normally taken by its write's event; one whose event never
// comes (its write was already in the list a refill read) stays until the
// key's next offer or its deletion.
func (c *watchCache) dropOffered(key string) {
	c.offeredMu.Lock()
	delete(c.offered, key)
	c.offeredMu.Unlock()
}

// takeOffered returns, for a put of value under key at rev, the object
// offered for it, stamped with rev; nil when none was. When value cannot
// be stamped, or the cache must hold what value decodes to, it leaves the
// object alone, as resourceStore.create, which then copies it, relies on.
//
// A lean object stored as protobuf is held as exactly that protobuf,
// stamped: nothing is encoded again. Any other object stored as protobuf
// is decoded from value, as if it had not been offered: protobuf cannot
// tell an empty list or map from none, and the cache holds what etcd
// holds, not what the writer had.
func (c *watchCache) takeOffered(key string, value []byte, rev int64) *cachedObject {
	c.offeredMu.Lock()
	o := c.offered[key]
	if o == nil || !bytes.Equal(o.data, value) {
		c.offeredMu.Unlock()
		return nil
	}
	delete(c.offered, key)
	c.offeredMu.Unlock()
	stamped, ok := o.stamped(rev)
	if !ok {
		return nil
	}
	protobuf := storedProtobuf(stamped)
	if !takesOffers(c.res, protobuf) {
		return nil
	}
	o.obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	if protobuf {
		return encoded(c.res, key, o.obj, nil, stamped, rev)
	}
	return encoded(c.res, key, o.obj, stamped, nil, rev)
}

// takesOffers reports whether the cache of res takes an offered object
// whose value is stored as protobuf (or JSON): any object stored as JSON,
// and a lean one stored as protobuf, which it holds as those bytes. Any
// other object stored as protobuf it decodes from etcd's value (see
// takeOffered).
func takesOffers(res *api.Resource, protobuf bool) bool {
	return !protobuf || leanResources[res]
}
