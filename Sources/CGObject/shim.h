#ifndef CALLEND_CGOBJECT_SHIM_H
#define CALLEND_CGOBJECT_SHIM_H
/* GLib's include paths for the CNice glue, from gobject-2.0's pkg-config file (libnice's own
   pulls in gio's -pthread, a flag SwiftPM refuses with a warning). No Swift code imports this. */
#include <glib-object.h>
#endif
