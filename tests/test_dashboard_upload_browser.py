"""Careless and hostile uploads and settings as a person sees them, in Chromium (issue 11).

The server runs with ``--server.maxUploadSize 1`` (MB), so a 2 MB file is over the limit:
Streamlit's uploader refuses it in the browser, and its own message ("File must be 1.0MB or
smaller.") is only a tooltip on a red mark. The page states the limit and the way around it
(Table on disk) next to the uploader, read from the server's option. A Parquet file under the
limit that would expand past the server's memory is refused from its footer, and what the page
says is read off the page. Set PRIVSYN_SCREENSHOTS to a folder to keep the screenshots
(assets/screenshots/ has the ones in the README).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from browser_support import Session, streamlit_server
from browser_support import chromium as chromium  # the fixture
from playwright.sync_api import expect

from privsyn_core.generation.memory import LOAD_BYTES_PER_CELL, USABLE_SHARE, available_bytes

LIMIT_MB = 1


@pytest.fixture(scope="module")
def small_limit_server(tmp_path_factory) -> Iterator[str]:
    """The dashboard with a 1 MB upload limit and a registry of its own."""
    folder = tmp_path_factory.mktemp("server")
    with streamlit_server(folder, "--server.maxUploadSize", str(LIMIT_MB)) as running:
        yield running.url
    assert "Traceback" not in running.log.read_text(), running.log.read_text()[-3000:]


def upload(user: Session, name: str, data: bytes) -> None:
    user.page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        {"name": name, "mimeType": "application/octet-stream", "buffer": data}
    )
    user.page.locator("[data-testid='stFileUploader']").get_by_text(name).wait_for()
    user.idle()  # the rerun the upload starts (none for a file refused in the browser)


def errors(user: Session) -> list[str]:
    return [e.inner_text() for e in user.page.locator("[data-testid='stAlertContentError']").all()]


def no_traceback(user: Session) -> None:
    assert user.page.locator("[data-testid='stException']").count() == 0
    assert "Traceback" not in user.page.locator("[data-testid='stMain']").inner_text()


def table_heading(user: Session) -> str:
    return user.page.locator("[data-testid='stMain'] h3").first.inner_text()


def test_an_upload_over_the_limit_is_refused_and_the_page_says_what_to_do(
    small_limit_server, chromium
):
    user = Session(chromium, small_limit_server)
    hint = user.page.get_by_text(f"Files up to {LIMIT_MB} MB")
    assert hint.is_visible() and "Table on disk" in hint.inner_text()
    assert "A file marked red was not uploaded" in hint.inner_text()
    upload(user, "two-megabytes.csv", b"colour,size\n" + b"red,1\n" * 350_000)
    uploader = user.page.locator("[data-testid='stFileUploader']").first
    assert "File must be 1.0MB or smaller." in uploader.inner_text()  # Streamlit's, a tooltip
    assert hint.is_visible(), "the limit and the way around it stay in view"
    assert table_heading(user).startswith("UCI Adult sample"), "the table in use is unchanged"
    no_traceback(user)
    user.page.get_by_text("Table on disk: a file on this server").click()
    user.page.wait_for_timeout(300)
    user.shot("upload-over-the-limit.png")
    user.assert_offline()
    user.close()


def test_a_parquet_bomb_under_the_limit_is_refused_from_its_footer(
    small_limit_server, chromium, tmp_path
):
    """400 million rows of one constant in under 1 MB: about 26 GB to load."""
    rows = 400_000_000
    needed = rows * LOAD_BYTES_PER_CELL["parquet"]
    assert needed > USABLE_SHARE * available_bytes(), "this machine could load it: no bomb"
    path = tmp_path / "bomb.parquet"
    chunk = pa.table({"flag": pa.array(np.zeros(50_000_000, dtype=np.int8))})
    with pq.ParquetWriter(path, chunk.schema, compression="zstd", write_statistics=False) as w:
        for _ in range(rows // 50_000_000):
            w.write_table(chunk, row_group_size=50_000_000)
    assert path.stat().st_size < LIMIT_MB * 2**20
    user = Session(chromium, small_limit_server)
    upload(user, "bomb.parquet", path.read_bytes())
    (message,) = errors(user)
    assert message.startswith("Could not use bomb.parquet: it is too big to load")
    assert "400,000,000 rows x 1 column" in message and "GB of memory" in message
    assert "use Table on disk (below)" in message
    assert "The table in use is still UCI Adult sample" in message
    assert table_heading(user).startswith("UCI Adult sample")
    no_traceback(user)
    user.shot("upload-parquet-bomb.png")
    user.close()


def test_a_broken_csv_says_which_line_and_keeps_the_table(small_limit_server, chromium):
    user = Session(chromium, small_limit_server)
    upload(user, "survey.csv", b"name,age\nAda,36\nBob,41,extra\n")
    (message,) = errors(user)
    assert "Could not use survey.csv" in message
    assert "line 3 has 3 values, but the header has 2 names" in message
    assert "Error tokenizing" not in message  # pandas' words, translated
    assert "as many values as the header has names" in message
    assert table_heading(user).startswith("UCI Adult sample")
    no_traceback(user)
    user.shot("upload-broken-csv.png")
    user.close()


def test_careless_epsilons_are_named_and_block_the_run(small_limit_server, chromium):
    user = Session(chromium, small_limit_server)
    user.open("Privacy")
    box = user.page.get_by_role("spinbutton", name="epsilon")
    expect(box).to_have_value("1.00")  # the session's epsilon, once the page has drawn it
    assert not errors(user)

    def enter(text: str) -> None:
        box.click()
        box.press("Control+a")
        box.press("Delete")
        box.press_sequentially(text)
        box.press("Enter")
        user.idle()

    for typed, says in [
        ("0", "got 0.0"),
        ("-1", "got -1.0"),
        ("", "epsilon is empty"),
        ("one", "epsilon is empty"),  # a number box takes no letters: it stays empty
    ]:
        enter(typed)
        alert = user.page.locator("[data-testid='stAlertContentError']")
        expect(alert).to_contain_text(says)  # the rerun with the typed value has drawn
        (message,) = errors(user)
        assert "such as 1" in message, (typed, message)
        no_traceback(user)
        if typed == "-1":
            user.shot("privacy-epsilon-negative.png")
    user.open("Run")
    expect(user.page.get_by_role("heading", name="Run PrivSyn")).to_be_visible()
    expect(user.page.locator("[data-testid='stAlertContentError']")).to_contain_text(
        "fix it on the Privacy page"
    )
    assert user.page.get_by_role("button", name="Run synthesis").count() == 0
    user.open("Privacy")
    enter("2")
    expect(user.page.get_by_text("At epsilon 2 and delta 1e-9")).to_be_visible()
    assert not errors(user)
    user.close()
