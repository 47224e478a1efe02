/* SPDX-License-Identifier: Apache-2.0 */
#include <libevdev/libevdev.h>
#include <linux/input.h>
#include <sys/ioctl.h>

/* EVIOCGRAB is a function-like macro Swift cannot import. */
static inline unsigned long shutterd_eviocgrab(void) { return EVIOCGRAB; }
#include <libevdev/libevdev-uinput.h>
#include <linux/uinput.h>

/* UI_SET_PHYS before UI_DEV_CREATE: libevdev's uinput creation does not set phys. */
static inline int shutterd_uinput_set_phys(int fd, const char *phys) { return ioctl(fd, UI_SET_PHYS, phys); }
