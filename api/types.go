package api

import "reflect"

func sameType(a, b any) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }
