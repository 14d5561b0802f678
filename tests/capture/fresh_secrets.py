"""Fresh secrets of the shapes real credentials take, made anew from a seed at every run.

Each shape is a rule of its issuer's format (prefix, length, alphabet, separators), written
down from the issuers' documentation, never a literal: the random parts are drawn from the
seed, so no redaction rule can be tuned to a value. A ``Secret`` carries the text as a user
would write it (a header, a URL, a config line, a bare token) and its ``cores``, the random
parts: any ``WINDOW`` consecutive characters of a core found in what the warehouse stored or
served is a leak (a partial redaction that leaves a tail is one too).

``ORDINARY`` is the other side: values and key names of ordinary runs that a scrub must leave
alone (hyper-parameters named after tokens, commit hashes, digests, UUIDs, paths, model names).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import random
import string
from collections.abc import Callable, Iterator

WINDOW = 12  # a run of this many characters of a secret's random part, stored, is a leak

_ALNUM = string.ascii_letters + string.digits
_B64 = _ALNUM + "+/"
_B64URL = _ALNUM + "-_"
_HEX = "0123456789abcdef"
_B32 = string.ascii_uppercase + "234567"


@dataclasses.dataclass(frozen=True)
class Secret:
    """One planted secret: its shape, the text a user writes, and its random parts."""

    shape: str
    text: str
    cores: tuple[str, ...]

    def windows(self) -> Iterator[str]:
        """Every ``WINDOW``-character run of every core."""
        for core in self.cores:
            for start in range(len(core) - WINDOW + 1):
                yield core[start : start + WINDOW]


class Draw:
    """Random parts from one seeded generator; each part is remembered as a core."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cores: list[str] = []

    def take(self, alphabet: str, n: int, *, core: bool = True) -> str:
        text = "".join(self.rng.choice(alphabet) for _ in range(n))
        if core and n >= WINDOW:
            self.cores.append(text)
        return text

    def alnum(self, n: int) -> str:
        return self.take(_ALNUM, n)

    def hex(self, n: int) -> str:
        return self.take(_HEX, n)

    def b64(self, n: int) -> str:
        return self.take(_B64, n)

    def b64url(self, n: int) -> str:
        return self.take(_B64URL, n)

    def digits(self, n: int, *, core: bool = False) -> str:
        return str(self.rng.randint(1, 9)) + self.take(string.digits, n - 1, core=core)

    def lower(self, n: int) -> str:
        return self.take(string.ascii_lowercase + string.digits, n)

    def password(self) -> str:
        """A password a person picks: words, digits and a sign (low entropy per character)."""
        words = ["horse", "Battery", "staple", "Correct", "winter", "Dragon", "purple", "monkey"]
        text = (
            self.rng.choice(words)
            + self.take(string.digits, 2, core=False)
            + self.rng.choice("!#%&*.@$")
            + self.take(string.ascii_letters + string.digits, 12, core=False)
        )
        self.cores.append(text)
        return text

    def user(self) -> str:
        return self.rng.choice(["admin", "deploy", "svc_ml", "alice", "root", "ci-bot"])

    def host(self) -> str:
        return self.rng.choice(["db.internal", "10.0.3.7", "prod-pg.example.com", "cache-1"])

    def uuid(self, *, core: bool = True) -> str:
        parts = [self.take(_HEX, n, core=False) for n in (8, 4, 4, 4, 12)]
        text = "-".join(parts)
        if core:
            self.cores.append(text)
        return text

    def pem_body(self, lines: int = 6) -> str:
        return "\n".join(self.b64(64) for _ in range(lines)) + "\n" + self.b64(24) + "=="


def _b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


SHAPES: dict[str, Callable[[Draw], str]] = {}


def _shape(fn: Callable[[Draw], str]) -> Callable[[Draw], str]:
    SHAPES[fn.__name__.removeprefix("_").replace("_", "-")] = fn
    return fn


# --- the shapes: each takes a Draw and returns the text a user would write ---------------------


@_shape
def _aws_credentials_line(d: Draw) -> str:
    return f"aws_secret_access_key = {d.b64(40)}"


@_shape
def _aws_env_pair(d: Draw) -> str:
    return f"AWS_ACCESS_KEY_ID=AKIA{d.take(_B32, 16)} AWS_SECRET_ACCESS_KEY={d.b64(40)}"


@_shape
def _aws_key_id(d: Draw) -> str:
    return f"ASIA{d.take(_B32, 16)}"


@_shape
def _aws_session_token(d: Draw) -> str:
    return "IQoJb3JpZ2luX2VjE" + d.b64(340) + "=="


@_shape
def _aws_presigned_url(d: Draw) -> str:
    return (
        f"https://ml-data.s3.amazonaws.com/ckpt/model.pt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential=ASIA{d.take(_B32, 16)}%2F20250101%2Fus-east-1%2Fs3%2Faws4_request"
        f"&X-Amz-Date=20250101T000000Z&X-Amz-Expires=3600"
        f"&X-Amz-Security-Token={d.alnum(120)}&X-Amz-SignedHeaders=host"
        f"&X-Amz-Signature={d.hex(64)}"
    )


@_shape
def _gcp_service_account(d: Draw) -> str:
    body = d.pem_body(4).replace("\n", "\\n")
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "ml-prod-31337",
            "private_key_id": d.hex(40),
            "private_key": "-----BEGIN PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----\n",
            "client_email": "trainer@ml-prod-31337.iam.gserviceaccount.com",
        }
    )


@_shape
def _azure_storage_connection(d: Draw) -> str:
    return (
        "DefaultEndpointsProtocol=https;AccountName=mlartifacts;"
        f"AccountKey={d.b64(86)}==;EndpointSuffix=core.windows.net"
    )


@_shape
def _azure_sas_url(d: Draw) -> str:
    sig = d.b64(43).replace("+", "%2B").replace("/", "%2F")
    return (
        "https://mlartifacts.blob.core.windows.net/models/run.ckpt?sv=2022-11-02&ss=b&srt=sco"
        f"&sp=rwdlacupx&se=2026-01-01T00:00:00Z&st=2025-01-01T00:00:00Z&spr=https&sig={sig}%3D"
    )


@_shape
def _azure_service_bus(d: Draw) -> str:
    return (
        "Endpoint=sb://ml-events.servicebus.windows.net/;"
        f"SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={d.b64(43)}="
    )


@_shape
def _azure_cosmos(d: Draw) -> str:
    return f"AccountEndpoint=https://mldb.documents.azure.com:443/;AccountKey={d.b64(86)}==;"


@_shape
def _azure_ad_client_secret(d: Draw) -> str:
    return d.take(_ALNUM, 3, core=False) + "8Q~" + d.take(_ALNUM + "_~.-", 34)


@_shape
def _azure_devops_pat(d: Draw) -> str:
    return f"AZURE_DEVOPS_EXT_PAT={d.take('abcdefghijklmnopqrstuvwxyz234567', 52)}"


@_shape
def _github_fine_grained(d: Draw) -> str:
    return f"github_pat_11{d.take(_B32 + string.digits, 20)}_{d.alnum(59)}"


@_shape
def _bitbucket_app_password(d: Draw) -> str:
    return "ATBB" + d.alnum(32) + d.take(_HEX.upper(), 8)


@_shape
def _atlassian_api_token(d: Draw) -> str:
    return "ATATT3xFfGF0" + d.b64url(170) + "=" + d.take(_HEX.upper(), 8)


@_shape
def _slack_bot(d: Draw) -> str:
    return f"xoxb-{d.digits(12)}-{d.digits(13)}-{d.alnum(24)}"


@_shape
def _slack_user(d: Draw) -> str:
    return f"xoxp-{d.digits(12)}-{d.digits(12)}-{d.digits(13)}-{d.hex(32)}"


@_shape
def _slack_app(d: Draw) -> str:
    return f"xapp-1-A0{d.take(_B32, 9)}-{d.digits(13)}-{d.hex(64)}"


@_shape
def _slack_webhook(d: Draw) -> str:
    return (
        f"https://hooks.slack.com/services/T{d.take(_B32, 10, core=False)}"
        f"/B{d.take(_B32, 10, core=False)}/{d.alnum(24)}"
    )


@_shape
def _discord_bot(d: Draw) -> str:
    return f"MT{d.b64url(24)}.{d.b64url(6)}.{d.b64url(38)}"


@_shape
def _discord_webhook(d: Draw) -> str:
    return f"https://discord.com/api/webhooks/{d.digits(19)}/{d.b64url(68)}"


@_shape
def _telegram_bot(d: Draw) -> str:
    return f"{d.digits(10)}:AA{d.b64url(33)}"


@_shape
def _teams_webhook(d: Draw) -> str:
    return (
        f"https://contoso.webhook.office.com/webhookb2/{d.uuid(core=False)}@{d.uuid(core=False)}"
        f"/IncomingWebhook/{d.hex(32)}/{d.uuid(core=False)}"
    )


@_shape
def _sendgrid(d: Draw) -> str:
    return f"SG.{d.b64url(22)}.{d.b64url(43)}"


@_shape
def _mailchimp(d: Draw) -> str:
    return d.hex(32) + "-us14"


@_shape
def _openai_project(d: Draw) -> str:
    return f"sk-proj-{d.b64url(74)}T3BlbkFJ{d.b64url(74)}"


@_shape
def _openai_legacy(d: Draw) -> str:
    return f"sk-{d.alnum(20)}T3BlbkFJ{d.alnum(20)}"


@_shape
def _openai_service_account(d: Draw) -> str:
    return f"sk-svcacct-{d.b64url(74)}T3BlbkFJ{d.b64url(74)}"


@_shape
def _anthropic(d: Draw) -> str:
    return f"sk-ant-api03-{d.b64url(93)}AA"


@_shape
def _anthropic_admin(d: Draw) -> str:
    return f"sk-ant-admin01-{d.b64url(93)}AA"


@_shape
def _huggingface(d: Draw) -> str:
    return "hf_" + d.take(string.ascii_letters, 34)


@_shape
def _wandb_login(d: Draw) -> str:
    return f"wandb login {d.hex(40)}"


@_shape
def _neptune_token(d: Draw) -> str:
    payload = json.dumps(
        {
            "api_address": "https://app.neptune.ai",
            "api_url": "https://app.neptune.ai",
            "api_key": d.uuid(),
        }
    )
    token = _b64(payload)
    d.cores.append(token[60:])  # the part that encodes the key
    return token


@_shape
def _kaggle_json(d: Draw) -> str:
    return json.dumps({"username": "mlteam", "key": d.hex(32)})


@_shape
def _npmrc(d: Draw) -> str:
    return f"//registry.npmjs.org/:_authToken={d.uuid()}"


@_shape
def _docker_config(d: Draw) -> str:
    auth = _b64(f"mlbot:{d.password()}")
    d.cores.append(auth)
    return json.dumps({"auths": {"ghcr.io": {"auth": auth}}})


@_shape
def _jwt(d: Draw) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = {
        "sub": d.uuid(core=False),
        "name": "trainer",
        "iat": d.rng.randint(1_600_000_000, 1_800_000_000),
    }
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    d.cores.append(payload)
    return f"{header}.{payload}.{d.b64url(43)}"


@_shape
def _pem_rsa(d: Draw) -> str:
    return f"-----BEGIN RSA PRIVATE KEY-----\n{d.pem_body()}\n-----END RSA PRIVATE KEY-----"


@_shape
def _pem_ec(d: Draw) -> str:
    return f"-----BEGIN EC PRIVATE KEY-----\n{d.pem_body(3)}\n-----END EC PRIVATE KEY-----"


@_shape
def _pem_encrypted(d: Draw) -> str:
    return (
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
        f"{d.pem_body()}\n-----END ENCRYPTED PRIVATE KEY-----"
    )


@_shape
def _openssh(d: Draw) -> str:
    return (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"
        f"{d.b64(40)}\n{d.pem_body(5)}\n-----END OPENSSH PRIVATE KEY-----"
    )


@_shape
def _pgp(d: Draw) -> str:
    return (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        f"lQVYBGX{d.b64(57)}\n{d.pem_body(4)}\n=Ab3x\n-----END PGP PRIVATE KEY BLOCK-----"
    )


@_shape
def _pem_escaped_in_string(d: Draw) -> str:
    body = d.pem_body(4).replace("\n", "\\n")
    return f'"-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n"'


@_shape
def _kube_client_key_data(d: Draw) -> str:
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{d.b64(64)}\n-----END RSA PRIVATE KEY-----\n"
    data = _b64(pem)
    d.cores.append(data[40:])
    return f"client-key-data: {data}"


@_shape
def _kube_token(d: Draw) -> str:
    return f"token: eyJhbGciOiJSUzI1NiIsImtpZCI6I{d.b64url(60)}.{d.b64url(300)}.{d.b64url(340)}"


@_shape
def _postgres_url(d: Draw) -> str:
    return f"postgresql://{d.user()}:{d.password()}@{d.host()}:5432/experiments"


@_shape
def _mongodb_srv(d: Draw) -> str:
    return f"mongodb+srv://{d.user()}:{d.password()}@cluster0.ab1cd.mongodb.net/?retryWrites=true"


@_shape
def _redis_url(d: Draw) -> str:
    return f"redis://:{d.password()}@{d.host()}:6379/0"


@_shape
def _rediss_default(d: Draw) -> str:
    return f"rediss://default:{d.alnum(32)}@cache.upstash.io:6380"


@_shape
def _amqp_url(d: Draw) -> str:
    return f"amqp://{d.user()}:{d.password()}@rabbit:5672/%2Fml"


@_shape
def _https_basic(d: Draw) -> str:
    return f"https://{d.user()}:{d.password()}@git.example.com/ml/models.git"


@_shape
def _sqlalchemy_mysql(d: Draw) -> str:
    return f"mysql+pymysql://root:{d.password()}@localhost:3306/runs?charset=utf8mb4"


@_shape
def _git_oauth_url(d: Draw) -> str:
    return f"git+https://oauth2:glpat-{d.b64url(20)}@gitlab.com/ml/data.git@v2"


@_shape
def _sentry_dsn(d: Draw) -> str:
    return f"https://{d.hex(32)}@o{d.digits(6)}.ingest.sentry.io/{d.digits(7)}"


@_shape
def _url_query_token(d: Draw) -> str:
    return f"https://api.example.com/v1/datasets?format=json&api_key={d.alnum(32)}"


@_shape
def _jdbc(d: Draw) -> str:
    return f"jdbc:postgresql://{d.host()}:5432/ml?user={d.user()}&password={d.password()}&ssl=true"


@_shape
def _odbc(d: Draw) -> str:
    return (
        "Server=tcp:mlsql.database.windows.net,1433;Database=runs;"
        f"User ID={d.user()};Password={d.password()};Encrypt=true;"
    )


@_shape
def _netrc(d: Draw) -> str:
    return f"machine api.wandb.ai login user password {d.hex(40)}"


@_shape
def _pgpass(d: Draw) -> str:
    return f"{d.host()}:5432:experiments:{d.user()}:{d.password()}"


@_shape
def _auth_bearer(d: Draw) -> str:
    return f"Authorization: Bearer {d.b64url(48)}"


@_shape
def _auth_basic(d: Draw) -> str:
    creds = _b64(f"{d.user()}:{d.password()}")
    d.cores.append(creds)
    return f"Authorization: Basic {creds}"


@_shape
def _auth_token(d: Draw) -> str:
    return f"Authorization: Token {d.hex(40)}"


@_shape
def _auth_digest(d: Draw) -> str:
    return (
        'Authorization: Digest username="ml", realm="api", nonce="dcd98b7102dd2f0e", '
        f'uri="/v1", response="{d.hex(32)}"'
    )


@_shape
def _auth_aws4(d: Draw) -> str:
    return (
        f"Authorization: AWS4-HMAC-SHA256 Credential=AKIA{d.take(_B32, 16)}/20250101/us-east-1/"
        f"s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={d.hex(64)}"
    )


@_shape
def _x_api_key(d: Draw) -> str:
    return f"X-Api-Key: {d.alnum(40)}"


@_shape
def _cookie(d: Draw) -> str:
    return f"Cookie: sessionid={d.lower(32)}; csrftoken={d.alnum(32)}"


@_shape
def _set_cookie(d: Draw) -> str:
    return f"Set-Cookie: __Secure-session={d.b64url(48)}; Path=/; HttpOnly; Secure"


@_shape
def _cli_password_eq(d: Draw) -> str:
    return f"--password={d.password()}"


@_shape
def _cli_password_space(d: Draw) -> str:
    return f"mysql --user {d.user()} --password {d.password()} --host {d.host()}"


@_shape
def _cli_mysql_p(d: Draw) -> str:
    return f"mysql -u root -p{d.password()} experiments"


@_shape
def _curl_user(d: Draw) -> str:
    return f"curl -u {d.user()}:{d.password()} https://artifacts.example.com/upload"


@_shape
def _cli_api_key(d: Draw) -> str:
    return f"--api-key {d.alnum(40)}"


@_shape
def _sshpass(d: Draw) -> str:
    return f"sshpass -p '{d.password()}' ssh deploy@gpu-node-3"


@_shape
def _export_password(d: Draw) -> str:
    return f"export DB_PASSWORD='{d.password()}'"


@_shape
def _dotenv_django(d: Draw) -> str:
    return f'SECRET_KEY="django-insecure-{d.take(_ALNUM + "!@#%^&*(-_=+)", 50)}"'


@_shape
def _dotenv_database_url(d: Draw) -> str:
    return f"DATABASE_URL=postgres://{d.user()}:{d.password()}@{d.host()}/app"


@_shape
def _proxy_env(d: Draw) -> str:
    return f"HTTPS_PROXY=http://{d.user()}:{d.password()}@proxy.corp:3128"


@_shape
def _python_kwargs(d: Draw) -> str:
    return f"psycopg2.connect(host='db', user='ml', password='{d.password()}')"


@_shape
def _b64_basic_bare(d: Draw) -> str:
    creds = _b64(f"{d.user()}:{d.password()}")
    d.cores.append(creds)
    return creds


@_shape
def _notion(d: Draw) -> str:
    return "ntn_" + d.digits(11, core=False) + d.alnum(35)


@_shape
def _grafana(d: Draw) -> str:
    return f"glsa_{d.alnum(32)}_{d.hex(8)}"


@_shape
def _newrelic(d: Draw) -> str:
    return "NRAK-" + d.take(_B32 + string.digits, 27)


@_shape
def _postman(d: Draw) -> str:
    return f"PMAK-{d.hex(24)}-{d.hex(34)}"


@_shape
def _age_key(d: Draw) -> str:
    return "AGE-SECRET-KEY-1" + d.take("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)


@_shape
def _terraform(d: Draw) -> str:
    return f"{d.alnum(14)}.atlasv1.{d.alnum(67)}"


@_shape
def _dotenv_file(d: Draw) -> str:
    return (
        "DEBUG=false\nLOG_LEVEL=info\n"
        f"OPENAI_API_KEY={d.alnum(48)}\nDB_PASS={d.password()}\nPORT=8080\n"
    )


@_shape
def _aws_credentials_file(d: Draw) -> str:
    return (
        "[default]\nregion = us-east-1\n"
        f"aws_access_key_id = AKIA{d.take(_B32, 16)}\naws_secret_access_key = {d.b64(40)}\n"
    )


@_shape
def _kubeconfig_file(d: Draw) -> str:
    return (
        "apiVersion: v1\nkind: Config\nusers:\n- name: ml\n  user:\n"
        f"    token: {d.b64url(64)}\n    password: {d.password()}\n"
    )


@_shape
def _pip_conf(d: Draw) -> str:
    return f"[global]\nindex-url = https://__token__:{d.b64url(40)}@pypi.corp.example/simple\n"


def make(shape: str, rng: random.Random) -> Secret:
    """A fresh secret of ``shape``."""
    d = Draw(rng)
    text = SHAPES[shape](d)
    return Secret(shape, text, tuple(d.cores))


def fresh(rng: random.Random) -> list[Secret]:
    """One fresh secret of every shape."""
    return [make(shape, rng) for shape in SHAPES]


# tokens that are their issuer's prefix and a random part: (shape, prefix, alphabet, length)
_PREFIXED = (
    ("gcp-api-key", "AIza", _B64URL, 35),
    ("gcp-oauth-client-secret", "GOCSPX-", _B64URL, 28),
    ("google-access-token", "ya29.a0", _B64URL, 160),
    ("google-refresh-token", "1//0", _B64URL, 98),
    ("github-classic", "ghp_", _ALNUM, 36),
    ("github-oauth", "gho_", _ALNUM, 36),
    ("github-app", "ghs_", _ALNUM, 36),
    ("gitlab-pat", "glpat-", _B64URL, 20),
    ("gitlab-trigger", "glptt-", _HEX, 40),
    ("stripe-secret", "sk_live_51", _ALNUM, 97),
    ("stripe-restricted", "rk_live_51", _ALNUM, 97),
    ("stripe-webhook", "whsec_", _ALNUM, 32),
    ("twilio-api-key", "SK", _HEX, 32),
    ("mailgun", "key-", _HEX, 32),
    ("replicate", "r8_", _ALNUM, 37),
    ("groq", "gsk_", _ALNUM, 52),
    ("xai", "xai-", _ALNUM, 80),
    ("npm", "npm_", _ALNUM, 36),
    ("pypi", "pypi-AgEIcHlwaS5vcmc", _B64URL, 150),
    ("dockerhub", "dckr_pat_", _B64URL, 27),
    ("vault", "hvs.CAESI", _B64URL, 90),
    ("databricks", "dapi", _HEX, 32),
    ("digitalocean", "dop_v1_", _HEX, 64),
    ("shopify", "shpat_", _HEX, 32),
    ("linear", "lin_api_", _ALNUM, 40),
    ("heroku", "HRKU-AA", _B64URL, 58),
)
for _name, _prefix, _alphabet, _length in _PREFIXED:
    SHAPES[_name] = functools.partial(
        lambda d, prefix, alphabet, length: prefix + d.take(alphabet, length),
        prefix=_prefix,
        alphabet=_alphabet,
        length=_length,
    )


# --- secrets that only their key names give away (a password a person picks) -----------------

_KEY_HEADS = ("", "db", "smtp", "svc", "prod", "admin", "login", "session", "refresh", "id", "sas")
_KEY_TAILS = (
    ("token",),
    ("password",),
    ("passwd",),
    ("pass",),
    ("pwd",),
    ("passphrase",),
    ("secret",),
    ("credentials",),
    ("bearer",),
    ("jwt",),
    ("api", "key"),
    ("access", "token"),
    ("client", "secret"),
    ("private", "key"),
    ("secret", "access", "key"),
    ("webhook", "secret"),
    ("signing", "key"),
    ("hmac", "key"),
    ("encryption", "key"),
    ("master", "key"),
    ("license", "key"),
)


def secret_key_name(rng: random.Random) -> str:
    """A key name that holds a secret, as configs write them: a plain head word or none, a
    secret word or a role and ``key``, in snake, kebab, dotted, camel or upper case."""
    words = [w for w in (rng.choice(_KEY_HEADS), *rng.choice(_KEY_TAILS)) if w]
    style = rng.choice(["snake", "kebab", "dotted", "camel", "upper"])
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "upper":
        return "_".join(words).upper()
    return {"snake": "_", "kebab": "-", "dotted": "."}[style].join(words)


def keyed_password(rng: random.Random) -> Secret:
    d = Draw(rng)
    text = d.password()
    return Secret("keyed-password", text, tuple(d.cores))


# --- ordinary values a scrub must leave alone -------------------------------------------------


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_HEX) for _ in range(n))


def ordinary_config(rng: random.Random) -> dict[str, object]:
    """A realistic training config: nothing in it is secret."""
    commit = _hex(rng, 40)
    uuid = f"{_hex(rng, 8)}-{_hex(rng, 4)}-4{_hex(rng, 3)}-a{_hex(rng, 3)}-{_hex(rng, 12)}"
    return {
        "model": {
            "name": "meta-llama/Llama-3.1-8B-Instruct",
            "revision": commit,
            "tokenizer": "meta-llama/Llama-3.1-8B-Instruct",
            "tokenizer_name": "EleutherAI/gpt-neox-20b",
            "token_dropout": 0.1,
            "max_tokens": 4096,
            "num_tokens": 1_000_000,
            "max_new_tokens": 256,
            "pad_token_id": 0,
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "special_tokens": ["<s>", "</s>", "<|eot_id|>"],
            "vocab_size": 128256,
            "rope_theta": 500000.0,
            "key_dim": 128,
            "num_key_value_heads": 8,
            "use_auth": False,
            "auth_required": False,
            "author": "Jane Doe",
            "authors": ["Jane Doe", "Wei Zhang"],
            "checkpoint": "s3://ml-models/llama/step-1200/model-00001-of-00004.safetensors",
            "cache_dir": "/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B/"
            f"snapshots/{_hex(rng, 40)}",
        },
        "optim": {"lr": 3e-4, "betas": [0.9, 0.95], "weight_decay": 0.1, "eps": 1e-8},
        "data": {
            "path": "/data/imagenet/train",
            "url": "https://huggingface.co/datasets/HuggingFaceFW/fineweb-edu?row=2&sort=desc",
            "sha256": _hex(rng, 64),
            "md5": _hex(rng, 32),
            "shards": [f"gs://ml-data/shard-{i:05d}.tar" for i in range(3)],
            "tokens_per_batch": 524288,
            "tokens_file": "/data/tokens/train.bin",
            "bypass_cache": True,
            "num_passes": 3,
            "sort_key": "val_acc",
            "primary_key": "sample_id",
            "cache_key": "fineweb-edu-v1.2",
        },
        "run": {
            "name": "llama3-8b-sft-lr3e-4-bs128-20250101",
            "commit": commit,
            "parent_run": _hex(rng, 12),
            "mlflow_run_id": _hex(rng, 32),
            "uuid": uuid,
            "docker_image": f"ghcr.io/ml/trainer@sha256:{_hex(rng, 64)}",
            "base_image": "nvcr.io/nvidia/pytorch:24.01-py3",
            "git_describe": f"v1.2.3-14-g{_hex(rng, 7)}",
            "wandb_run": "".join(
                rng.choice(string.ascii_lowercase + string.digits) for _ in range(8)
            ),
            "endpoint": "http://localhost:8080/v1/chat/completions",
            "hostname": "gpu-node-17.cluster.local",
            "seed": rng.randint(0, 2**31),
            "output_dir": "outputs/2025-01-01/12-00-00",
            "monkey_patch": True,
            "keyword": "regression",
            "signature": {"inputs": '[{"name": "x", "type": "tensor"}]'},
            "param_name": "model.layers.31.self_attn.k_proj.weight",
            "arxiv": "https://arxiv.org/abs/2401.12345v2",
            "cmd": ["torchrun", "--nproc-per-node", "8", "train.py", "--max-tokens", "4096"],
        },
    }


def ordinary_texts(rng: random.Random) -> list[str]:
    """Ordinary per-sample texts and names (prompts, code, ids, image data)."""
    png = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(600))).decode()
    return [
        "Translate to French: the cat sat on the mat.",
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
        "The token limit was 4096; the tokenizer split 'password' into 2 tokens.",
        f"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{png}",
        f"imagenet/val/n01440764/ILSVRC2012_val_{rng.randint(0, 50000):08d}.JPEG",
        f"commit {_hex(rng, 40)} fixed the warmup",
        f"sha256:{_hex(rng, 64)}",
        "https://github.com/huggingface/transformers/blob/main/README.md",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "Résumé: 東京は日本の首都です。",
        f"ckpt_epoch=3-step={rng.randint(1, 9999)}.ckpt",
        "Please enter your password to continue.",  # a word, not a secret
        f"{_hex(rng, 8)}-{_hex(rng, 4)}-4{_hex(rng, 3)}-b{_hex(rng, 3)}-{_hex(rng, 12)}",
        "x = torch.randn(3, 4); y = x @ x.T",
        "Q: What is 17 * 23? A: 391",
        "We use scikit-learn (sk-learn) and the key idea is attention.",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total)",
        "fe80::1ff:fe23:4567:890a and 00:1a:2b:3c:4d:5e at 2025-01-01T12:30:45.123456Z",
        "The password must be at least 8 characters; the token is the unit of text.",
        "model.layers.31.self_attn.k_proj.weight has shape [1024, 4096]",
        "Set --max-tokens 512 and --num-passes 3 for the eval.",
        "Authorization is required to access the leaderboard.",
    ]
