from typing import Any
import pytest
from conftest import DEV_KEY, PROD_KEY, auth
from fake_upstream import FakeUpstream
from yarl import URL

class Rec(FakeUpstream):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.raw: list[str] = []
    async def _record(self, request: Any) -> Any:
        self.raw.append(request.raw_path)
        return await super()._record(request)

@pytest.fixture
async def upstream() -> Any:
    fake = Rec({DEV_KEY: "development", PROD_KEY: "production"})
    await fake.start()
    yield fake
    await fake.close()

async def test_exp(make_relay: Any, upstream: Any) -> None:
    relay = await make_relay()
    r = await relay.get(URL("/api/client/features?project=default&namePrefix=a%23b%26c%2Bd%3De&tag=simple:x&x=%25", encoded=True), headers=auth(DEV_KEY))
    print(r.status)
    for p in ["/api/admin/projects/../environments", "/api/admin/projects/./environments", "/api/admin/projects/%2E/environments", "/api/client/features/..", "/api/client/features/%2e%2E", "/api/client/features/with%20space", "/api/client/features/a%2Fb"]:
        m = "GET" if "features" in p else "POST"
        r = await relay.request(m, URL(p, encoded=True), headers=auth(DEV_KEY))
        print(p, r.status, (await r.text())[:60])
    print(upstream.raw)
    await upstream.close()
    r = await relay.get("/api/client/features", headers=auth(DEV_KEY))
    print(r.status, await r.text())
