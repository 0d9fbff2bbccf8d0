# deckhand %postun ($1: 0 = erase, 1 = upgrade; this is the OLD package's script on upgrade).
# On upgrade, restart a running agent on the new binary (its containers survive and are
# re-adopted). On erase, reload systemd and remove tasks.d if empty. rpm has no purge: the state
# in /var/lib/deckhand is kept (delete it by hand), and a modified deckhand.conf is kept as
# deckhand.conf.rpmsave. The deckhand group is kept, as on Debian.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart deckhand.service >/dev/null 2>&1 || :
    fi
fi
if [ "$1" -eq 0 ]; then
    rmdir /etc/deckhand/tasks.d 2>/dev/null || :
    rmdir /etc/deckhand 2>/dev/null || :
    # The package cannot own directories (its builder lists files only), so rpm leaves these
    # behind empty; rmdir never deletes anything the admin put there.
    rmdir /usr/share/doc/deckhand/examples /usr/share/doc/deckhand 2>/dev/null || :
fi
exit 0
