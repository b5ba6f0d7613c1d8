"""http_session.Session (plugins/module_utils/http_session.py) asks a server with ansible.module_utils.urls's Request
of the ansible-core that ships it to the host: under every supported ansible-core (Request.open takes a TLS context
only from 2.17 on; 2.16's answered "unexpected keyword argument 'context'")."""
import ansible.module_utils.urls  # noqa: F401 (the API under test: the controller's ansible-core ships it)

from ansible_collections.blackwell.serving.plugins.module_utils.http_session import Session
from modrun import serve_in_turn


def test_a_session_asks_several_times_with_headers_and_a_body():
    with serve_in_turn((200, b'{"ok": true}')) as (url, seen):
        session = Session()
        for n in range(3):
            with session.open_url(f"{url}/health?n={n}", headers={"Authorization": "Bearer k"}, timeout=5) as r:
                assert r.status == 200 and r.read() == b'{"ok": true}'
    assert seen == [f"/health?n={n}" for n in range(3)]
