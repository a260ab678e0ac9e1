/* SPDX-License-Identifier: MIT */
/*
 * ctl/peer.c: who is on the other end of a control connection, and what
 * they may do. SO_PEERCRED gives the peer's uid, gid and pid at connect
 * time; its groups come from the group database (getgrouplist on the uid's
 * name) plus its primary gid. Levels (doc/control.md):
 * admin = root or voltd's own uid; operator = a member of
 * control.operator_group; user = anyone the socket's mode lets connect.
 * Control thread only (the group lookups may block on NSS: never a worker).
 */
#include "config.h"
#include "ctl/internal.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/socket.h>

const char *vctl__level_name(enum vctl_level l)
{
	switch (l) {
	case VCTL_USER: return "user";
	case VCTL_OPERATOR: return "operator";
	case VCTL_ADMIN: return "admin";
	}
	return "?";
}

static bool in_group(uid_t uid, gid_t primary, gid_t want)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	gid_t groups[256];
	int n = (int)(sizeof(groups) / sizeof(groups[0]));

	if (primary == want)
		return true;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return false;
	/* n too small: getgrouplist returns -1 having filled what fits; a
	 * member beyond the first 256 groups is not seen (documented). */
	if (getgrouplist(res->pw_name, primary, groups, &n) < 0)
		n = (int)(sizeof(groups) / sizeof(groups[0]));
	for (int i = 0; i < n; i++)
		if (groups[i] == want)
			return true;
	return false;
}

int vctl__peer_get(struct vctl *ctl, int fd, struct vctl_peer *out)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int64_t op_gid;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -errno;
	out->pid = cr.pid;
	out->uid = cr.uid;
	out->gid = cr.gid;
	if (cr.uid == 0 || cr.uid == ctl->self_uid)
		out->level = VCTL_ADMIN;
	else if ((op_gid = atomic_load_explicit(&ctl->op_gid, memory_order_relaxed)) >= 0 && /* see internal.h */
		 in_group(cr.uid, cr.gid, (gid_t)op_gid))
		out->level = VCTL_OPERATOR;
	else
		out->level = VCTL_USER;
	return 0;
}
