package stripe

import (
	"reflect"

	"github.com/paywebhooks/receiver/internal/webhooks"
)

// plainObject is dataObject without its methods: what json/v2 makes of
// the struct by reflection alone.
type plainObject dataObject

// DecodeObjectBothWays decodes a data.object with dataObject's own decode
// and with json/v2's of the same struct, and returns both.
func DecodeObjectBothWays(raw []byte) (own, plain any, ownErr, plainErr error) {
	var o dataObject
	var p plainObject
	ownErr = webhooks.UnmarshalSigned(raw, &o)
	plainErr = webhooks.UnmarshalSigned(raw, &p)
	return o, dataObject(p), ownErr, plainErr
}

// ObjectFieldsByMember reports, for every field of dataObject, the member
// name its tag gives and whether Member returns that field for it.
func ObjectFieldsByMember() map[string]bool {
	var o dataObject
	v := reflect.ValueOf(&o).Elem()
	out := map[string]bool{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name := f.Tag.Get("json")
		p := o.Member([]byte(name))
		out[name] = p != nil && reflect.TypeOf(p) == reflect.PointerTo(f.Type) &&
			reflect.ValueOf(p).Pointer() == v.Field(i).Addr().Pointer()
	}
	return out
}

// PeriodicTypes are the types the periodic reconciliation lists.
var PeriodicTypes = periodicTypes
