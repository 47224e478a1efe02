#include <libevdev/libevdev.h>
#include <linux/input.h>
#include <sys/ioctl.h>

/* EVIOCGRAB is a function-like macro Swift cannot import. */
static inline unsigned long shutterd_eviocgrab(void) { return EVIOCGRAB; }
#include <libevdev/libevdev-uinput.h>
