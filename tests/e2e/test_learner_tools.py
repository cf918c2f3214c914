"""In the learner's JupyterLab (the settings `make course` applies), the browser shows nbgrader's
assignment list at most: no Create Assignment panel, no formgrader, no course list, no news prompt."""
import urllib.error
import urllib.request

import pytest

INSTRUCTOR_COMMANDS = ["nbgrader:open-formgrader", "nbgrader:open-formgrader-local", "nbgrader:open-course-list",
                       "nbgrader:open-create-assignment"]


def test_the_learner_sees_no_instructor_tools_and_no_news(page):
    app = page.evaluate("""(names) => {
        const app = window.jupyterapp;
        const menu = document.querySelector('#jp-MainMenu');
        return {
            commands: Object.fromEntries(names.map(n => [n, app.commands.hasCommand(n)])),
            assignmentList: app.commands.hasCommand('nbgrader:open-assignment-list'),
            plugins: Object.fromEntries(['@jupyter/nbgrader:formgrader', '@jupyter/nbgrader:create-assignment',
                '@jupyter/nbgrader:course-list', '@jupyterlab/apputils-extension:announcements',
                '@jupyter/nbgrader:assignment-list'].map(p => [p, app.hasPlugin(p)])),
            menus: [...menu.querySelectorAll('.lm-MenuBar-itemLabel')].map(e => e.textContent),
        };
    }""", INSTRUCTOR_COMMANDS)
    assert app["commands"] == {name: False for name in INSTRUCTOR_COMMANDS}
    assert app["assignmentList"] and app["plugins"]["@jupyter/nbgrader:assignment-list"]
    assert not any(v for k, v in app["plugins"].items() if k != "@jupyter/nbgrader:assignment-list"), app["plugins"]
    if "Nbgrader" not in app["menus"]:
        pytest.fail(f"no Nbgrader menu in {app['menus']}: the learner's assignment list should stay reachable")
    page.click("#jp-MainMenu .lm-MenuBar-item:has-text('Nbgrader')")
    page.wait_for_selector("#jp-mainmenu-nbgrader")
    shown = page.evaluate("""() => [...document.querySelectorAll('#jp-mainmenu-nbgrader .lm-Menu-item')]
        .filter(e => !e.classList.contains('lm-mod-hidden') && getComputedStyle(e).display !== 'none')
        .map(e => e.textContent.trim())""")
    page.keyboard.press("Escape")
    assert shown == ["Assignment List"], shown


def test_the_learners_server_has_no_formgrader(lab):
    base, token, _, _ = lab
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"{base}formgrader?token={token}", timeout=30)
    assert answer.value.code == 404
    with urllib.request.urlopen(f"{base}api/status?token={token}", timeout=30) as status:
        assert status.status == 200
