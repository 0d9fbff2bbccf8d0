# deckhand %post ($1: 1 = install, 2 = upgrade). On a first install, enables and starts the
# service (what the .deb gets from debhelper). Upgrades restart it from the old package's
# %postun, after the old files are gone. Works without a running systemd: `systemctl enable` only
# edits symlinks. (The empty /etc/deckhand/tasks.d is in the package itself.)
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl enable deckhand.service >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload >/dev/null 2>&1 || :
        systemctl start deckhand.service >/dev/null 2>&1 || :
    fi
fi
exit 0
